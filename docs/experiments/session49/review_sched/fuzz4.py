"""Differential fuzz with grammars (fast-forward), logprobs and logit_bias in a busy scheduler
with random arrivals: each task vs alone (fast-forward off for the reference)."""
import random, sys
sys.path.insert(0, "/tmp/rev_sched/test")
from common import loader, rowwise
import server.scheduler.guide as guide
from server.scheduler import DynamicScheduler
from server.task.task import Task
from server.task.constraint import Constraint, json_grammar
from server.api.tools import ToolSpec, forced_call_grammar
from constrained_cases import SCHEMA

L = loader(); rowwise(L.model)
V = 65536
import os
CAPS = [int(x) for x in os.environ.get("CAPS", "2,4,8").split(",")]
PARAMS = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
          "properties": {"city": {"type": "string", "maxLength": 12},
                         "unit": {"enum": ["celsius", "fahrenheit"]}}}
CALL = forced_call_grammar([ToolSpec("get_weather", "", PARAMS), ToolSpec("get_time", "", {})],
                           {"type": "function", "function": {"name": "get_weather"}}, lead=">")
GRAMMARS = [CALL, json_grammar(SCHEMA) if callable(json_grammar) else None]

def make(spec):
    toks, p, extra = spec
    t = Task(list(toks), **p)
    g = extra.get("grammar")
    t.constraint = Constraint(g, L.tokenizer) if g else None
    t.logprobs = extra.get("logprobs")
    t.logit_bias = extra.get("bias")
    return t

def alone(spec, chunk, buf):
    old = guide.FF_MIN
    guide.FF_MIN = 10**9
    try:
        s = DynamicScheduler(L, max_batch_size=1, buffer_size=buf, prefill_chunk=chunk)
        t = make(spec); s.add_task(t); s.run()
    finally:
        guide.FF_MIN = old
    return t.output, t.finish_reason, t.output_logprobs

def one(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 7)
    chunk = rng.choice([32, 512]); buf = rng.choice([1, 2, 4, 8])
    specs, arrive = [], []
    for i in range(n):
        toks = L.encode(f"User: weather {rng.randrange(100)}?\n\nAssistant: <think>\n</think")
        if rng.random() < 0.3:
            toks = [rng.randrange(1, V) for _ in range(rng.choice([1, 40]))] + toks
        p = dict(max_tokens=rng.choice([5, 20, 60, 80]), temperature=rng.choice([0.0, 1.0]),
                 top_k=rng.choice([0, 50]), top_p=rng.choice([1.0, 0.7]),
                 presence_penalty=rng.choice([0.0, 0.7]), repetition_penalty=rng.choice([0.0, 0.3]),
                 penalty_decay=rng.choice([0.0, 0.9]), seed=rng.randrange(1 << 30))
        extra = {}
        if rng.random() < 0.7:
            extra["grammar"] = rng.choice(GRAMMARS)
        if rng.random() < 0.3:
            extra["logprobs"] = rng.choice([0, 2])
        if rng.random() < 0.2:
            extra["bias"] = {rng.randrange(V): rng.choice([-100.0, 3.0]) for _ in range(3)}
        specs.append((toks, p, extra)); arrive.append(rng.randint(0, 10))
    s = DynamicScheduler(L, max_batch_size=rng.choice(CAPS), buffer_size=buf, prefill_chunk=chunk)
    tasks = [None] * n; step = 0
    while True:
        for i in range(n):
            if arrive[i] == step and tasks[i] is None:
                tasks[i] = make(specs[i]); s.add_task(tasks[i])
        if all(t is not None for t in tasks) and not s.has_work:
            break
        if s._has_slot_work:
            s.step()
        else:
            s.engine.copyback.wait_idle(0.1)
        step += 1
        if step > 5000:
            print("STUCK", seed); return False
    ok = True
    for i, t in enumerate(tasks):
        got = (t.output, t.finish_reason, t.output_logprobs)
        exp = alone(specs[i], chunk, buf)
        if got[:2] != exp[:2] or (specs[i][2].get("logprobs") is not None and
                                  [e[0] for e in got[2]] != [e[0] for e in exp[2]]):
            ok = False
            print(f"seed {seed} task {i} p={specs[i][1]} extra={ {k: (v if k != 'grammar' else v[:20]) for k, v in specs[i][2].items()} } chunk={chunk} buf={buf}")
            print("  got", got[0], got[1]); print("  exp", exp[0], exp[1])
    return ok

if __name__ == "__main__":
    a, b = int(sys.argv[1]), int(sys.argv[2])
    bad = [sd for sd in range(a, b) if not one(sd)]
    print("bad seeds", bad)
