import json
from harness import send, flags
M = [{"role":"user","content":"hi"}]
def tool(name="f", params=None):
    return {"type":"function","function":{"name":name,"parameters":params if params is not None else {"type":"object","properties":{"a":{"type":"string"}}}}}
raw_cases = {
 "req_nan": b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"number","minimum":NaN}}}}}]}',
 "req_surr_name": b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"tool_choice":"required","tools":[{"type":"function","function":{"name":"\\ud800","parameters":{}}}]}',
 "forced_surr_name": b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"tool_choice":{"type":"function","function":{"name":"\\ud800"}},"tools":[{"type":"function","function":{"name":"\\ud800","parameters":{}}}]}',
 "req_surr_prop": b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"\\ud800":{"type":"string"}},"required":["\\ud800"]}}}]}',
 "stream_req_surr": b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true,"tool_choice":"required","tools":[{"type":"function","function":{"name":"\\ud800","parameters":{}}}]}',
}
for k, v in raw_cases.items():
    send(k, "POST", "/v1/chat/completions", raw=v)
weird_params = [None, [], "x", 1, True, {"type":"array"}, {"type":"string"}, {"$ref":"#/nope"}, {"type":"object","properties":{"a":{"$ref":"#"}}},
  {"type":"object","properties":{"a":{"type":"string","pattern":"(a"}}}, {"type":"object","properties":{"a":{"type":"string","pattern":"a{1000000}"}}},
  {"type":"object","properties":{"a":{"type":"array","minItems":1000000}}, "required":["a"]}, {"type":"object","properties":{"a":{"type":"integer","minimum":5,"maximum":1}},"required":["a"]},
  {"type":"object","required":["zz"],"additionalProperties":False}, {"not":{}}, False, {"type":"object","properties":{"a":{"type":"string","minLength":10**20}},"required":["a"]},
  {"type":"object","properties":{"a":{"type":"integer","multipleOf":0}},"required":["a"]}, {"type":"object","properties":{"a":{"type":"number","minimum":1e400}}},
  {"type":"object","properties":{"a":{"type":"string","format":"date-time"}},"required":["a"]},
]
tcs = ["required", "auto", "none", {"type":"function","function":{"name":"f"}}, {"type":"function"}, {"type":"function","function":{}}, {"type":"function","function":{"name":5}}, {}, "bogus", {"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[]}}]
for p in weird_params:
    for tc in tcs[:4]:
        for stream in (False, True):
            send(f"params={json.dumps(p)[:60]} tc={tc} s={stream}", "POST", "/v1/chat/completions", {"messages": M, "max_tokens": 8, "tools":[tool(params=p)], "tool_choice": tc, "stream": stream})
for tc in tcs:
    send(f"tc={tc}", "POST", "/v1/chat/completions", {"messages": M, "max_tokens": 8, "tools":[tool()], "tool_choice": tc})
    send(f"tc={tc} notools", "POST", "/v1/chat/completions", {"messages": M, "max_tokens": 8, "tool_choice": tc})
odd_tools = [[{}], [{"type":"function"}], [{"type":"function","function":None}], [{"type":"function","function":{"name":""}}], [{"type":"function","function":{"name":"a b\n"}}],
  [tool("f"), tool("f")], [{"type":"custom","custom":{"name":"x"}}], [1], ["x"], [None], [tool("x"*100000)], [tool(f"f{i}") for i in range(2000)], [{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":True}}]]
for t in odd_tools:
    for tc in ("required", "auto"):
        send(f"tools={json.dumps(t)[:60]} tc={tc}", "POST", "/v1/chat/completions", {"messages": M, "max_tokens": 8, "tools": t, "tool_choice": tc})
print("FLAGS", len(flags))
for f in flags: print(f)
