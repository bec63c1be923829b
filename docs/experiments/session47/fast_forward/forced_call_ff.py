from server.model.tokenizer import Tokenizer
from server.task.constraint import Constraint
from server.api.tools import forced_call_grammar, ToolSpec
tok = Tokenizer()
schema = {"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":False}
for choice in ({"type":"function","function":{"name":"get_weather"}}, "required"):
    g = forced_call_grammar([ToolSpec("get_weather","",schema), ToolSpec("get_time","",{"type":"object"})], choice, lead=">")
    c = Constraint(g, tok)
    text = '>\n<tool_call>{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}</tool_call>'
    for t in tok.encode(text):
        f = c._matcher.compute_ff_tokens()
        print(repr(tok.decode([t])), len(f), repr(tok.decode(f)))
        assert c.accept(t)
    print('---')
