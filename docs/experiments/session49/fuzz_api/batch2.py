import json, gzip
from harness import send, flags
routes = ["/v1/chat/completions", "/v1/completions", "/v1/tasks/tmp", "/v1/tasks/create", "/v1/tasks/fim", "/v1/tasks/import_state"]
chat = '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
raws = {
 "empty": b"", "null": b"null", "array": b"[]", "str": b'"x"', "num": b"1", "true": b"true",
 "nan_temp": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"temperature":NaN}',
 "inf_temp": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"temperature":Infinity}',
 "ninf_topp": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"top_p":-Infinity}',
 "nan_maxtok": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":NaN}',
 "inf_maxtok": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":Infinity}',
 "inf_seed": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"seed":Infinity}',
 "nan_seed": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"seed":NaN}',
 "inf_topk": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"top_k":Infinity}',
 "nan_n": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"n":NaN}',
 "nan_bias": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"logit_bias":{"5":NaN}}',
 "inf_bias": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"logit_bias":{"5":Infinity}}',
 "nan_tlp": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"logprobs":NaN,"top_logprobs":NaN}',
 "nan_content": b'{"messages":[{"role":"user","content":NaN}],"prompt":NaN,"max_tokens":2}',
 "nan_in_schema": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"number","maximum":NaN}}}}',
 "inf_in_schema": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","minimum":Infinity}}}}',
 "nan_in_tools": b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"number","minimum":NaN}}}}}]}',
 "nan_so": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"stream":true,"stream_options":{"include_usage":NaN}}',
 "bigint": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":' + b"9"*5000 + b"}",
 "bigint_seed": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"seed":' + b"9"*4000 + b"}",
 "bigint_prompt_ids": b'{"prompt":[' + b"9"*4000 + b'],"max_tokens":2}',
 "bigfloat": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"temperature":1e999}',
 "negzero": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"temperature":-0.0,"top_p":-0.0}',
 "tiny_temp": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"temperature":1e-320}',
 "tiny_topp": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"top_p":1e-320,"min_p":1e-320}',
 "dupkeys": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"max_tokens":"x"}',
 "dupkeys2": b'{"messages":[],"messages":[{"role":"user","content":"hi"}],"prompt":1,"prompt":"hi","max_tokens":2}',
 "deep_arr": b'{"messages":' + b"["*100000 + b"]"*100000 + b',"prompt":' + b"["*100000 + b"]"*100000 + b"}",
 "deep_obj": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"user":' + b'{"a":'*5000 + b"1" + b"}"*5000 + b"}",
 "deep_900": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"x":' + b"["*900 + b"]"*900 + b"}",
 "deep_990_content": b'{"messages":[{"role":"user","content":' + b"["*990 + b"]"*990 + b'}],"prompt":' + b"["*990 + b"]"*990 + b',"max_tokens":2}',
 "trunc": b'{"messages":[{"role":"user","content":"hi"}',
 "bad_utf8": b'{"messages":[{"role":"user","content":"\xff\xfe"}],"prompt":"\xff","max_tokens":2}',
 "bom": b'\xef\xbb\xbf' + chat.encode(),
 "utf16": chat.encode("utf-16"),
 "nul": b'{"messages":[{"role":"user","content":"a\\u0000b"}],"prompt":"a\\u0000b","max_tokens":2}',
 "surrogate_key": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"\\ud800":1}',
 "surrogate_model": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"model":"\\udfff\\ud800"}',
 "surrogate_stop": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"stop":["\\ud800"]}',
 "surrogate_biaskey": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"logit_bias":{"\\ud800":1}}',
 "surrogate_rf": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"response_format":{"type":"\\ud800"}}',
 "surrogate_schema": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"name":"\\ud800","schema":{"type":"object","properties":{"\\ud800":{"type":"string","pattern":"\\ud800"}},"required":["\\ud800"]}}}}',
 "surrogate_enum": b'{"messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"enum":["\\ud800"]}}}}',
 "surrogate_tool": b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tools":[{"type":"function","function":{"name":"\\ud800","parameters":{}}}]}',
 "surrogate_toolchoice": b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"\\ud800"}}}',
 "surrogate_reff": b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"reasoning_effort":"\\ud800"}',
 "surrogate_role": b'{"messages":[{"role":"\\ud800","content":"hi"}],"max_tokens":2}',
 "surrogate_suffix": b'{"prompt":"hi","suffix":"\\ud800","max_tokens":2,"prefix":"\\ud800"}',
 "surrogate_echo": b'{"prompt":"hi\\ud800","echo":true,"logprobs":2,"max_tokens":2}',
 "surrogate_echo_stream": b'{"prompt":"hi\\ud800","echo":true,"stream":true,"max_tokens":2}',
 "surrogate_pair_split": b'{"prompt":"\\ud83d","echo":true,"max_tokens":2,"stop":"\\ude00"}',
}
ctypes = [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=latin-1", "application/json; charset=utf-16", "application/jsonx"]
for route in routes:
    for name, raw in raws.items():
        send(f"{route} {name}", "POST", route, raw=raw)
    for ct in ctypes:
        send(f"{route} ctype={ct}", "POST", route, raw=chat.replace('"messages"','"prompt":"hi","messages"').encode(), headers={"content-type": ct} if ct else {"content-type": ""})
    send(f"{route} gzip", "POST", route, raw=gzip.compress(chat.replace('"messages"','"prompt":"hi","messages"').encode()), headers={"content-encoding": "gzip"})
    send(f"{route} gzip-bogus", "POST", route, raw=b"\x1f\x8b\x08garbage", headers={"content-encoding": "gzip"})
    send(f"{route} br", "POST", route, raw=chat.encode(), headers={"content-encoding": "br"})
print("FLAGS", len(flags))
for f in flags: print(f)
