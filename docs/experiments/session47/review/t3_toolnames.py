from common import loader
L = loader()
from server.api.tools import parse_tools, forced_call_grammar
from server.task.constraint import Constraint
import numpy as np
for name in ["café", "get_weather", "a\"b", "a\\b", "tab\tname", "日本", "x\u2028y", "a/b"]:
    tools = parse_tools([{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {"c": {"type": "string"}}}}}])
    try:
        g = forced_call_grammar(tools, "required", ">")
        c = Constraint(g, L.tokenizer)
        print(repr(name), "ok")
    except Exception as e:
        print(repr(name), "->", type(e).__module__, type(e).__name__, str(e)[:200])
