"""Cost of compiling response_format grammars in-process (json_grammar runs on the event loop in the route), and Constraint creation."""
import time, json, sys
sys.path.insert(0, "/tmp/qa46")
from server.task.constraint import json_grammar, Constraint, GrammarError
from server.model.tokenizer import Tokenizer
tok = Tokenizer()
schemas = {
 "enum20k": {"enum": [f"value_{i}" for i in range(20000)]},
 "props2k": {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(2000)}, "required": [f"p{i}" for i in range(2000)]},
 "deep200": None,
 "pattern_rep": {"type": "string", "pattern": "^(a|b|c){1,2000}x{1,2000}$"},
 "minmaxlen": {"type": "string", "minLength": 100000, "maxLength": 200000},
 "array_minItems": {"type": "array", "items": {"type": "integer"}, "minItems": 50000},
 "anyOf_many": {"anyOf": [{"type": "object", "properties": {f"k{i}": {"const": i}}, "required": [f"k{i}"]} for i in range(2000)]},
}
d = {"type": "integer"}
for i in range(200): d = {"type": "object", "properties": {"x": d}, "required": ["x"]}
schemas["deep200"] = d
for name, s in schemas.items():
    t = time.time()
    try:
        g = json_grammar(s); t1 = time.time() - t
        t = time.time(); c = Constraint(g, tok); t2 = time.time() - t
        import numpy as np
        row = np.zeros((65536 + 31) // 32, dtype=np.int32); t = time.time(); c.fill_mask(row); t3 = time.time() - t
        print(f"{name}: json_grammar {t1*1000:.0f} ms, Constraint {t2*1000:.0f} ms, first mask {t3*1000:.0f} ms, body {len(json.dumps(s))} bytes")
    except Exception as e:
        print(f"{name}: {type(e).__name__} after {(time.time()-t)*1000:.0f} ms: {str(e)[:150]}")
