"""Constraint.probe on the grammars the API fuzzing helper found failing a few tokens into a
reply, and on grammars replies can follow (ms a probe, the 2-core CPU machine):
    OMP_NUM_THREADS=2 PYTHONPATH=. uv run python docs/experiments/session49/probe_time.py"""
import time

from server.api.tools import ToolSpec, forced_call_grammar
from server.model.tokenizer import Tokenizer
from server.task.constraint import Constraint, json_grammar

tok = Tokenizer()
NEST = {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}
CASES = {
    "$ref '#'": ({"$ref": "#"}, None), "$ref '#', chat lead": ({"$ref": "#"}, ">"),
    "endless required nesting": (NEST, None), "the same, chat lead": (NEST, ">"),
    "nested repeats pattern": ({"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string", "pattern": "(.{0,10}){100}"}}}, None),
    "anyOf of 2,100 objects": ({"anyOf": [
        {"type": "object", "properties": {f"k{i}": {"type": "integer"}},
         "required": [f"k{i}"], "additionalProperties": False} for i in range(2100)]}, None),
    "a plain object, chat lead": ({"type": "object", "properties": {
        "x": {"type": "integer"}}}, ">"),
}
grammars = {name: json_grammar(schema, lead) for name, (schema, lead) in CASES.items()}
for k in (1, 3, 120):
    tools = [ToolSpec(f"f{i}", "", {"type": "object", "properties": {"a": {"type": "string"}}})
             for i in range(k)]
    grammars[f"forced call, {k} tools"] = forced_call_grammar(tools, "required", lead=">")
for name, grammar in grammars.items():
    c = Constraint(grammar, tok)
    t = time.perf_counter()
    problem = c.probe()
    ms = (time.perf_counter() - t) * 1e3
    print(f"{name}: {ms:.1f} ms: {problem if problem is None else problem[:110]}")
