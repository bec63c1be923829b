"""Realistic JSON schemas and forced tool-call grammars through the request path's grammar
builders, then Constraint.probe(): any refusal of a valid schema is a false 400."""
import json, time, copy
from server.api.response_format import response_grammar
from server.api.tools import ToolSpec, forced_call_grammar
from server.task.constraint import Constraint, closed_objects
from server.model.tokenizer import Tokenizer

tok = Tokenizer()
S = {}
S["flat"] = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}
S["optional_only"] = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}}
S["enum"] = {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}, "size": {"type": "string", "enum": ["S", "M", "L", "XL"]}}, "required": ["color", "size"]}
S["nested"] = {"type": "object", "properties": {"user": {"type": "object", "properties": {"id": {"type": "integer"}, "address": {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["street", "zip"]}}, "required": ["id", "address"]}}, "required": ["user"]}
S["array_minItems"] = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 5}}, "required": ["tags"]}
S["array_objects"] = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}, "required": ["sku", "qty"]}, "minItems": 1}}, "required": ["items"]}
S["defs"] = {"$defs": {"Person": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}}, "required": ["name"]}}, "type": "object", "properties": {"author": {"$ref": "#/$defs/Person"}, "reviewers": {"type": "array", "items": {"$ref": "#/$defs/Person"}}}, "required": ["author", "reviewers"]}
S["tree_optional_children"] = {"$defs": {"Node": {"type": "object", "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["value"]}}, "$ref": "#/$defs/Node"}
S["tree_required_children_array"] = {"$defs": {"Node": {"type": "object", "properties": {"value": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["value", "children"]}}, "$ref": "#/$defs/Node"}
S["linked_list_nullable"] = {"$defs": {"L": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/L"}, {"type": "null"}]}}, "required": ["v", "next"]}}, "$ref": "#/$defs/L"}
S["formats"] = {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"}, "id": {"type": "string", "format": "uuid"}, "mail": {"type": "string", "format": "email"}, "uri": {"type": "string", "format": "uri"}, "t": {"type": "string", "format": "time"}, "ip": {"type": "string", "format": "ipv4"}}, "required": ["when", "day", "id", "mail", "t", "ip"]}
S["patterns"] = {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^\\+?[0-9]{1,3}-[0-9]{3}-[0-9]{4}$"}, "code": {"type": "string", "pattern": "^[A-Z]{3}[0-9]{2,4}$"}, "slug": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"}}, "required": ["phone", "code", "slug"]}
S["oneOf_anyOf"] = {"type": "object", "properties": {"shape": {"oneOf": [{"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]}, {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "number"}, "h": {"type": "number"}}, "required": ["kind", "w", "h"]}]}}, "required": ["shape"]}
S["type_union"] = {"type": "object", "properties": {"x": {"type": ["string", "null"]}, "y": {"type": ["integer", "number"]}}, "required": ["x", "y"]}
S["numbers_bounds"] = {"type": "object", "properties": {"p": {"type": "number", "minimum": 0, "maximum": 1}, "n": {"type": "integer", "minimum": -5, "maximum": 5}, "m": {"type": "integer", "multipleOf": 5}}, "required": ["p", "n"]}
S["string_lengths"] = {"type": "object", "properties": {"s": {"type": "string", "minLength": 10, "maxLength": 20}}, "required": ["s"]}
S["const_only"] = {"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"]}
S["empty_props_closed"] = {"type": "object", "properties": {}, "additionalProperties": False}
S["additional_schema"] = {"type": "object", "additionalProperties": {"type": "integer"}}
S["prefixItems"] = {"type": "object", "properties": {"pt": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": False}}, "required": ["pt"]}
S["array_root"] = {"type": "array", "items": {"type": "integer"}, "minItems": 3}
S["string_root"] = {"type": "string"}
S["bool_root"] = {"type": "boolean"}
S["allOf"] = {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]}
S["pydantic_style"] = {"$defs": {"Status": {"enum": ["open", "closed"], "title": "Status", "type": "string"}, "Item": {"properties": {"title": {"title": "Title", "type": "string"}, "status": {"$ref": "#/$defs/Status"}, "tags": {"default": [], "items": {"type": "string"}, "title": "Tags", "type": "array"}, "due": {"anyOf": [{"format": "date", "type": "string"}, {"type": "null"}], "default": None, "title": "Due"}}, "required": ["title", "status"], "title": "Item", "type": "object"}}, "properties": {"items": {"items": {"$ref": "#/$defs/Item"}, "title": "Items", "type": "array"}, "total": {"title": "Total", "type": "integer"}}, "required": ["items", "total"], "title": "Inventory", "type": "object"}
S["unicode_keys"] = {"type": "object", "properties": {"名前": {"type": "string"}, "âge": {"type": "integer"}}, "required": ["名前", "âge"]}
S["key_with_quotes"] = {"type": "object", "properties": {"a\"b": {"type": "string"}, "c\\d": {"type": "integer"}}, "required": ["a\"b", "c\\d"]}
S["patternProperties"] = {"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "string"}}, "additionalProperties": False}
S["deep_required_finite"] = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "properties": {"c": {"type": "object", "properties": {"d": {"type": "object", "properties": {"e": {"type": "string"}}, "required": ["e"]}}, "required": ["d"]}}, "required": ["c"]}}, "required": ["b"]}}, "required": ["a"]}
S["many_props"] = {"type": "object", "properties": {f"field_{i}": {"type": ["string", "integer", "boolean", "null"][i % 4]} for i in range(200)}, "required": [f"field_{i}" for i in range(0, 200, 3)]}
S["big_enum"] = {"type": "object", "properties": {"country": {"enum": [f"Country{i:03d}" for i in range(300)]}}, "required": ["country"]}
S["json_object"] = None

def schema_fmt(s, strict):
    if s is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": s, "strict": strict}}

bad = []
times = []
Constraint(response_grammar({"type": "json_object"}), tok)  # warm the vocabulary
for name, s in S.items():
    for strict in (False, True):
        for lead in (None, ">"):
            try:
                g = response_grammar(schema_fmt(s, strict), lead)
            except Exception as e:
                print(f"{name:30s} strict={strict} lead={lead!r}: grammar refused: {e}"[:200]); continue
            c = Constraint(g, tok)
            t = time.perf_counter(); why = c.probe(); dt = time.perf_counter() - t
            times.append((dt, name))
            if why:
                bad.append((name, strict, lead, why))
                print(f"{name:30s} strict={strict} lead={lead!r}: PROBE REFUSED: {why}")
# tool calls
def tool(name, params, strict=False):
    return ToolSpec(name=name, description="d", parameters=params, strict=strict)
tools_sets = {
  "weather+search+calc": [tool("get_weather", {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}),
                          tool("search", {"type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer"}}, "required": ["q"]}),
                          tool("calc", {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]})],
  "noparams": [tool("now", {}), tool("ping", {"type": "object", "properties": {}})],
  "single_noparams": [tool("now", {})],
  "prefix_names": [tool("get", {"type": "object", "properties": {"a": {"type": "string"}}}), tool("get_all", {"type": "object", "properties": {"b": {"type": "integer"}}}), tool("get_all_users", {"type": "object", "properties": {}})],
  "strict_nested": [tool("create", S["pydantic_style"], True), tool("tree", S["tree_optional_children"], True)],
  "defs_tools": [tool("review", S["defs"]), tool("order", S["array_objects"])],
  "many_tools_128": [tool(f"tool_{i}", {"type": "object", "properties": {"x": {"type": "string"}, "n": {"type": "integer"}}, "required": ["x"]}) for i in range(128)],
}
for name, tl in tools_sets.items():
    for choice in ["required"] + [{"type": "function", "function": {"name": tl[0].name}}]:
        for lead in (None, ">"):
            try:
                g = forced_call_grammar(tl, choice, lead)
            except Exception as e:
                print(f"tools {name} {choice} lead={lead!r}: grammar refused: {e}"[:200]); continue
            c = Constraint(g, tok)
            t = time.perf_counter(); why = c.probe(); dt = time.perf_counter() - t
            times.append((dt, "tools:" + name))
            if why:
                bad.append(("tools:" + name, choice, lead, why))
                print(f"tools {name} choice={choice if isinstance(choice, str) else 'named'} lead={lead!r}: PROBE REFUSED: {why}")
times.sort()
print(f"\n{len(times)} probes, {len(bad)} refused; probe time median {times[len(times)//2][0]*1e3:.2f} ms, max {times[-1][0]*1e3:.1f} ms ({times[-1][1]})")
print("slowest:", [(f"{d*1e3:.1f}ms", n) for d, n in times[-5:]])
