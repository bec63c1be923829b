"""Part 1b: bad values on every Task API round endpoint: 422 naming the field, never 500."""
import json
from h import *

f = open("/tmp/qa46c/qa/t1b_errors.out", "w")
P = "User: hi\n\nAssistant:"
# a source task for continue/fork
src = post("/v1/tasks/create", {"prompt": P, "max_tokens": 3, "seed": 1})[1]["task_id"]
wait(src)

BAD = [
    ("logit_bias", {"abc": 1}), ("logit_bias", {"70000": 1}), ("logit_bias", {"65536": 1}),
    ("logit_bias", {"-1": 1}), ("logit_bias", {"1": 101}), ("logit_bias", {"1": -100.5}),
    ("logit_bias", {"1": "x"}), ("logit_bias", {"1": True}), ("logit_bias", {"1": None}),
    ("logit_bias", {"1": [1]}), ("logit_bias", {"9" * 30: 1}), ("logit_bias", {"9" * 5000: 1}),
    ("logit_bias", [1, 2]), ("logit_bias", "x"), ("logit_bias", {str(i): 1 for i in range(301)}),
    ("logit_bias", {"1": 1e308}), ("logit_bias", {" 1": 1}), ("logit_bias", {"١": 1}),
    ("response_format", {"type": "xml"}), ("response_format", {}), ("response_format", {"type": None}),
    ("response_format", {"type": ["json_object"]}), ("response_format", "json_object"),
    ("response_format", {"type": "json_schema"}),
    ("response_format", {"type": "json_schema", "json_schema": 5}),
    ("response_format", {"type": "json_schema", "json_schema": {"schema": 5}}),
    ("response_format", {"type": "json_schema", "json_schema": {"schema": {"type": "foo"}}}),
    ("response_format", {"type": "json_schema", "json_schema": {"schema": {"$ref": "#/nope"}}}),
    ("response_format", {"type": "json_schema", "json_schema": {"schema": {"type": "object", "x-guidance": "abc"}}}),
    ("response_format", {"type": "json_schema", "json_schema": {"schema": {"type": "object", "x-guidance": [1]}}}),
    ("response_format", {"type": "json_schema", "json_schema": {"schema": {"type": "object", "x-guidance": {"bogus": 1}}}}),
    ("response_format", {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "(("}}}),
    ("response_format", {"type": "json_schema", "json_schema": {"schema": {"type": "integer", "minimum": 5, "maximum": 1}}}),
]
deep = {"type": "object"}
for _ in range(400):
    deep = {"type": "object", "properties": {"a": deep}}
BAD.append(("response_format", {"type": "json_schema", "json_schema": {"schema": deep}}))

EPS = [("/v1/tasks/tmp", {"prompt": P}), ("/v1/tasks/create", {"prompt": P}),
       ("/v1/tasks/fim", {"prefix": "a", "suffix": "b"}), (f"/v1/tasks/{src}/continue", {"prompt": " x"}),
       (f"/v1/tasks/{src}/fork", {"prompt": " x"}), (f"/v1/tasks/{src}/fork?tmp=true", {"prompt": " x"})]
bad_count = 0
for field, val in BAD:
    for ep, base in EPS:
        body = {**base, "max_tokens": 5, field: val}
        try:
            r = C.post(ep, json=body)
            s = r.status_code
            txt = r.text
        except Exception as e:
            s, txt = "EXC", repr(e)
        named = field in txt
        good = s == 422 and named
        if not good:
            bad_count += 1
        if not good or ep.endswith("/v1/tasks/tmp"):
            log(f, f"{'OK ' if good else 'BAD'} {ep[:40]:40} {field}={str(val)[:60]} -> {s} {txt[:300]}")
log(f, "non-422/unnamed:", bad_count)
# valid edge values: should be 200
for field, val in [("logit_bias", {}), ("logit_bias", None), ("response_format", None),
                   ("response_format", {"type": "text"}), ("logit_bias", {"1": 100, "2": -100}),
                   ("logit_bias", {"1": 5.0}), ("logit_bias", {"01": 5})]:
    s, j = post("/v1/tasks/tmp", {"prompt": P, "max_tokens": 3, field: val})
    log(f, f"valid {field}={json.dumps(val)} -> {s} {str(j)[:150]}")
