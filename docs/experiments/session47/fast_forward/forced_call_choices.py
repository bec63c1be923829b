from server.model.tokenizer import Tokenizer
from server.task.constraint import Constraint
from server.api.tools import forced_call_grammar, ToolSpec
tok = Tokenizer()
schema = {"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":False}
g = forced_call_grammar([ToolSpec("get_weather","",schema)], {"type":"function","function":{"name":"get_weather"}}, lead=">")
c = Constraint(g, tok)
# walk: consume '>' then '\n' and count forced steps (steps where only one token allowed)
import numpy as np
from server.task.constraint import fill_masks
text = '>\n<tool_call>{"name":"get_weather","arguments":{"city":"Paris","unit":"c"}}</tool_call>'
ids = tok.encode(text)
forced = 0
for t in ids:
    w = np.zeros((1, c.words), dtype=np.int32); fill_masks([(c,0)], w)
    n = sum(bin(x & 0xffffffff).count("1") for x in w[0].tolist())
    forced += n == 1
    print(repr(tok.decode([t])), n)
    assert c.accept(t)
print("tokens", len(ids), "single-choice steps", forced)
