import json
from harness import send, flags
S = [
 {"type": "string", "pattern": "a{100000}"}, {"type": "string", "pattern": "(a|b)*c{5000}"}, {"type": "string", "pattern": "(\\w+\\s?){1,5000}"},
 {"type": "string", "pattern": "(a)\\1"}, {"type": "string", "pattern": "(?=a)b"}, {"type": "string", "pattern": "\\p{Greek}+"}, {"type": "string", "pattern": "[\\ud800]"},
 {"type": "string", "minLength": 1000000000}, {"type": "string", "maxLength": 10**18}, {"type": "string", "minLength": 5, "maxLength": 1},
 {"type": "array", "minItems": 10**9}, {"type": "array", "items": {"type": "integer"}, "minItems": 100000, "maxItems": 100000},
 {"type": "integer", "minimum": -10**30, "maximum": 10**30}, {"type": "number", "multipleOf": 1e-300}, {"type": "integer", "multipleOf": 7, "minimum": 1, "maximum": 3},
 {"$ref": "#"}, {"$ref": "#/definitions/a", "definitions": {"a": {"$ref": "#/definitions/a"}}}, {"$ref": "http://example.com/x.json"}, {"$ref": "file:///etc/passwd"},
 {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}, {"allOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string"}, {"type": "string"}]},
 {"type": "string", "format": "email"}, {"type": "string", "format": "uuid"}, {"type": "string", "format": "bogus"}, {"type": "string", "contentEncoding": "base64"},
 {"if": {"type": "string"}, "then": {"minLength": 2}}, {"type": "object", "patternProperties": {"^a+$": {"type": "integer"}}}, {"type": "object", "minProperties": 1000},
 {"type": "object", "propertyNames": {"pattern": "^x"}}, {"dependentRequired": {"a": ["b"]}}, {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(3000)}, "required": [f"p{i}" for i in range(3000)]},
 {"type": ["string", "null", "integer", "object", "array", "boolean", "number"]}, {"enum": []}, {"const": {"a": [1, {"b": None}]}}, {"type": "object", "additionalProperties": {"$ref": "#"}},
 {"anyOf": [{"$ref": "#"}, {"type": "integer"}]}, {"items": [{"type": "string"}] * 2000, "type": "array", "minItems": 2000}, {"prefixItems": [{"type": "integer"}] * 1500, "type": "array", "minItems": 1500},
 {"type": "string", "pattern": "^(a+)+$"}, {"type": "string", "pattern": "[" }, {"type": "string", "pattern": "x" * 100000},
]
for s in S:
    for strict in (False, True):
        rf = {"type": "json_schema", "json_schema": {"name": "s", "schema": s, "strict": strict}}
        send(f"comp schema={json.dumps(s)[:60]} strict={strict}", "POST", "/v1/completions", {"prompt": "x", "max_tokens": 6, "response_format": rf})
    send(f"chat schema={json.dumps(s)[:60]} stream", "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 6, "stream": True, "n": 2, "logprobs": True, "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": s}}})
combos = [{"echo": True}, {"echo": True, "logprobs": 3}, {"echo": True, "max_tokens": 0, "logprobs": 1}, {"suffix": "}"}, {"stop": ["{"]}, {"stop": "\""}, {"n": 5}, {"best_of": 3, "n": 1}, {"max_tokens": 1}, {"logit_bias": {str(i): -100 for i in range(300)}}, {"logit_bias": {"0": 100}}, {"temperature": 0}, {"top_k": 1, "min_p": 1}]
for cmb in combos:
    for fmt in ({"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}):
        b = {"prompt": "x", "max_tokens": 20, "response_format": fmt, **cmb}
        send(f"comp combo={cmb} fmt={fmt['type']}"[:100], "POST", "/v1/completions", b)
        b["stream"] = True
        if "best_of" not in cmb:
            send(f"comp stream combo={cmb} fmt={fmt['type']}"[:100], "POST", "/v1/completions", b)
        tb = {"prompt": "x", "max_tokens": 20, "response_format": fmt}
        for k in ("logit_bias", "temperature", "top_k", "min_p"):
            if k in cmb: tb[k] = cmb[k]
        send(f"task combo={cmb} fmt={fmt['type']}"[:100], "POST", "/v1/tasks/tmp", tb)
print("FLAGS", len(flags))
for f in flags: print(f)
