"""Does compute_ff_tokens ever include end-of-text (forced() strips it; probe consumes the run as
is)? Walk the probe's path printing each run, for wholly-forced grammars."""
import numpy as np
from server.api.tools import ToolSpec, forced_call_grammar
from server.api.response_format import response_grammar
from server.task.constraint import Constraint, lark_grammar
from server.model.tokenizer import Tokenizer
tok = Tokenizer()
gs = {
 "one tool no params, named": forced_call_grammar([ToolSpec("now", "", {})], {"type": "function", "function": {"name": "now"}}),
 "const schema": response_grammar({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"]}, "strict": True}}),
 "lark literal": lark_grammar('start: "hello world"\n'),
}
for name, g in gs.items():
    c = Constraint(g, tok)
    m = c._matcher.deep_copy(); w = np.zeros(c.words, dtype=np.int32)
    for n in range(12):
        m.unsafe_compute_mask_ptr(w.ctypes.data, w.nbytes)
        allowed = np.flatnonzero(np.unpackbits(w.view(np.uint8), bitorder="little"))
        run = list(m.compute_ff_tokens())
        print(name, n, "allowed", allowed[:4], len(allowed), "ff", run, "err", m.is_error(), "stopped", m.is_stopped())
        if not run:
            if len(allowed) == 1 and allowed[0] == 0: break
            run = [int(allowed[1] if allowed[0] == 0 else allowed[0])]
        m.consume_tokens(run)
    print(name, "probe:", c.probe())
