"""Recursive-but-finite schemas whose lowest-token path nests (probe's path: '[' < ']'),
and big schemas' probe time."""
import time, json
from server.api.response_format import response_grammar
from server.task.constraint import Constraint
from server.model.tokenizer import Tokenizer
tok = Tokenizer()
fmt = lambda s, strict=False: {"type": "json_schema", "json_schema": {"name": "x", "schema": s, "strict": strict}}
nested_list = {"$defs": {"NL": {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/NL"}]}}},
               "type": "object", "properties": {"data": {"$ref": "#/$defs/NL"}}, "required": ["data"]}
any_json = {"$defs": {"V": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/V"}}, {"type": "object", "additionalProperties": {"$ref": "#/$defs/V"}},
                                     {"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]}},
            "type": "object", "properties": {"meta": {"$ref": "#/$defs/V"}}, "required": ["meta"]}
matrix = {"type": "object", "properties": {"m": {"type": "array", "items": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}}}, "required": ["m"]}
expr = {"$defs": {"E": {"anyOf": [{"type": "array", "prefixItems": [{"enum": ["+", "*"]}, {"$ref": "#/$defs/E"}, {"$ref": "#/$defs/E"}], "items": False, "minItems": 3}, {"type": "number"}]}},
        "type": "object", "properties": {"expr": {"$ref": "#/$defs/E"}}, "required": ["expr"]}
menu = {"$defs": {"Item": {"type": "object", "properties": {"label": {"type": "string"}, "submenu": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1}}, "required": ["submenu", "label"]}}, "$ref": "#/$defs/Item"}
# (menu: every item requires a non-empty submenu: infinite by design, a true refusal)
cases = {"nested_list": nested_list, "any_json": any_json, "matrix3": matrix, "expr_tree": expr, "menu_required_nonempty(infinite)": menu}
for n in (1000, 3000):
    cases[f"props_{n}"] = {"type": "object", "properties": {f"p{i}": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]} for i in range(n)}, "required": [f"p{i}" for i in range(0, n, 2)]}
for name, s in cases.items():
    for strict in (False, True):
        t0 = time.perf_counter()
        try:
            c = Constraint(response_grammar(fmt(s, strict)), tok)
        except Exception as e:
            print(f"{name} strict={strict}: compile refused: {str(e)[:160]}"); continue
        t1 = time.perf_counter(); why = c.probe(); t2 = time.perf_counter()
        print(f"{name:34s} strict={strict!s:5} compile {1e3*(t1-t0):8.1f} ms, probe {1e3*(t2-t1):7.1f} ms: {why}")
