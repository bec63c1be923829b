from common import *
import httpx
class Inner(BaseModel):
    v: Literal["p", "q"]
class Node(BaseModel):
    a: Inner
    b: List[Inner] = Field(max_length=2)
    c: Optional[Inner] = None
    d: Optional[int] = None
    e: Inner | Literal["none"]
def show(label, f):
    t=time.time()
    try: print(label, "->", f(), f"({time.time()-t:.1f}s)")
    except openai.APIStatusError as e: print(label, "-> HTTP", e.status_code, json.dumps(e.body)[:300], f"({time.time()-t:.1f}s)")
    except Exception as e: print(label, "-> EXC", type(e).__name__, str(e)[:300], f"({time.time()-t:.1f}s)")
def p(rf, mt=300, **kw):
    r = client.chat.completions.parse(model=M, messages=msgs(), response_format=rf, max_tokens=mt, seed=11, **kw)
    c=r.choices[0]; return (c.finish_reason, repr(c.message.parsed)[:200])
def cr(mt=200, **kw):
    r = client.chat.completions.create(model=M, messages=msgs(), max_tokens=mt, seed=11, **kw)
    c=r.choices[0]; return (c.finish_reason, repr(c.message.content)[:200], c.message.tool_calls)
print("Node schema:", json.dumps(openai.lib._pydantic.to_strict_json_schema(Node))[:600])
show("$ref/$defs+anyOf via parse", lambda: p(Node))
show("$ref/$defs raw (non-strict pydantic schema, additionalProperties omitted)", lambda: cr(response_format={"type":"json_schema","json_schema":{"name":"N","schema":Node.model_json_schema()}}))
show("recursive $ref", lambda: cr(mt=100, response_format={"type":"json_schema","json_schema":{"name":"T","schema":{"$defs":{"T":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/T"},"maxItems":2}},"required":["kids"],"additionalProperties":False}},"$ref":"#/$defs/T"}}}))
big = [f"v{i:03d}_{'abcdefgh'[i%8]}" for i in range(500)]
show("500-value enum", lambda: cr(response_format={"type":"json_schema","json_schema":{"name":"E","schema":{"type":"object","properties":{"x":{"enum":big}},"required":["x"],"additionalProperties":False}}}))
show("500-value enum in tool", lambda: cr(tools=[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"enum":big}},"required":["x"],"additionalProperties":False}}}], tool_choice="required"))
show("unusable schema (unknown type)", lambda: cr(response_format={"type":"json_schema","json_schema":{"name":"B","schema":{"type":"banana"}}}))
show("unusable schema (bad $ref)", lambda: cr(response_format={"type":"json_schema","json_schema":{"name":"B","schema":{"$ref":"#/$defs/Nope"}}}))
show("unsat schema (minimum>maximum)", lambda: cr(response_format={"type":"json_schema","json_schema":{"name":"B","schema":{"type":"integer","minimum":5,"maximum":1}}}))
show("json_schema without schema obj", lambda: cr(response_format={"type":"json_schema"}))
show("json_schema, name only", lambda: cr(response_format={"type":"json_schema","json_schema":{"name":"x"}}))
show("unknown rf type", lambda: cr(response_format={"type":"xml"}))
show("rf text", lambda: cr(mt=5, response_format={"type":"text"}, extra_body={"reasoning_effort":"none"}))
show("rf + tools", lambda: cr(response_format={"type":"json_object"}, tools=[openai.pydantic_function_tool(Small)]))
show("rf + tools tool_choice none", lambda: cr(mt=30, response_format={"type":"json_object"}, tools=[openai.pydantic_function_tool(Small)], tool_choice="none"))
show("parse(rf=Model, tools=[...])", lambda: p(Small, tools=[openai.pydantic_function_tool(Node)]))
show("tool_choice names missing fn", lambda: cr(tools=[openai.pydantic_function_tool(Small)], tool_choice={"type":"function","function":{"name":"Nope"}}))
show("tool_choice required, tools=[]", lambda: cr(tools=[], tool_choice="required"))
show("tool params not object", lambda: cr(tools=[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}], tool_choice="required"))
show("tool params no parameters key", lambda: cr(mt=60, tools=[{"type":"function","function":{"name":"f"}}], tool_choice="required"))
show("tool params unusable", lambda: cr(tools=[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"$ref":"#/nope"}}}}}], tool_choice="required"))
show("json_object", lambda: cr(mt=40, response_format={"type":"json_object"}))
show("schema with pattern/format", lambda: cr(mt=80, response_format={"type":"json_schema","json_schema":{"name":"P","schema":{"type":"object","properties":{"d":{"type":"string","format":"date"},"z":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["d","z"],"additionalProperties":False}}}))
show("stop string with rf", lambda: cr(response_format=Small and {"type":"json_schema","json_schema":{"name":"S","schema":openai.lib._pydantic.to_strict_json_schema(Small)}}, stop=[","]))
show("completions rf", lambda: (lambda r:(r.choices[0].finish_reason, r.choices[0].text[:120]))(client.completions.create(model=M, prompt="JSON:", max_tokens=200, seed=2, extra_body={"response_format":{"type":"json_schema","json_schema":{"name":"S","schema":openai.lib._pydantic.to_strict_json_schema(Small)}}})))
