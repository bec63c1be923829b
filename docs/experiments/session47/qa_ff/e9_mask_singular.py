"""For many schemas: at each token a fast-forward feeds, is it the ONLY token the grammar's mask
allows there?  If not, step-by-step decoding could pick another token (the model decides), so
fast-forward changes replies.  Also compare replies FF on/off."""
from common import *
import numpy as np
from server.task.constraint import fill_masks
from server.scheduler.cycle import SlotCycle

SCHEMAS = {
 "enum_long": {"type": "object", "required": ["c"], "additionalProperties": False,
               "properties": {"c": {"enum": ["Paris is a lovely city", "Parisian", "London calling"]}}},
 "const": {"type": "object", "required": ["v", "w"], "additionalProperties": False,
           "properties": {"v": {"const": "version-1.2.3-alpha"}, "w": {"type": "integer"}}},
 "nested": {"type": "object", "required": ["a"], "additionalProperties": False,
            "properties": {"a": {"type": "object", "required": ["bb", "cc"], "additionalProperties": False,
                                 "properties": {"bb": {"type": "boolean"}, "cc": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2}}}}},
 "pattern": {"type": "object", "required": ["id"], "additionalProperties": False,
             "properties": {"id": {"type": "string", "pattern": "^ID-[0-9]{2}-XYZW$"}}},
 "anyof": {"type": "object", "required": ["x"], "additionalProperties": False,
           "properties": {"x": {"anyOf": [{"type": "string", "enum": ["alphabetical"]}, {"type": "integer"}]}}},
 "free_obj": None,
}
bad = []
real = SlotCycle._fast_forward
def spy(self, slot, forced):
    task = self.slots[slot]
    c = Constraint(task.constraint.grammar, L.tokenizer)
    for t in task.output:
        c.accept(t)
    n = min(len(forced), task._max_new - len(task.output) - 1)
    for t in forced[:n]:
        m = np.zeros((1, c.words), dtype=np.int32); fill_masks([(c, 0)], m)
        allowed = np.flatnonzero(np.unpackbits(m.view(np.uint8), bitorder="little"))
        if len(allowed) != 1:
            bad.append((task.task_id, L.decode([t]), len(allowed), [L.decode([int(a)]) for a in allowed[:5]]))
        c.accept(t)
    return real(self, slot, forced)
SlotCycle._fast_forward = spy

def go(grammar, off):
    ctx = ff_off() if off else None
    if ctx: ctx.__enter__()
    s = DynamicScheduler(L, max_batch_size=8, buffer_size=8)
    ts = []
    for i in range(4):
        kw = dict(temperature=0.0) if i == 0 else dict(seed=i, **SAMPLED)
        t = s.new_task(prompt(i), max_tokens=50, **kw); t.constraint = Constraint(grammar, L.tokenizer); ts.append(t)
    s.run()
    if ctx: ctx.__exit__()
    return [list(t.output) for t in ts], sum(p["steps"] for p in s.pulses)

for name, schema in SCHEMAS.items():
    g = json_grammar(schema, ">")
    bad.clear()
    a, sa = go(g, False); b, sb = go(g, True)
    print(name, "replies", "same" if a == b else "DIFFERENT", "steps", sa, sb, "non-singular fed tokens:", bad[:3], len(bad))
    if a != b:
        for x, y in zip(a, b):
            if x != y: print("   on :", repr(L.decode(x))); print("   off:", repr(L.decode(y)))
