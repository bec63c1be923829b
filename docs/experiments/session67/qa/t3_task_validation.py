import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
base={"prompt":"Hi","max_tokens":2}
cases = [
 ("missing prompt", {"max_tokens":2}),
 ("prompt null", {"prompt":None,"max_tokens":2}),
 ("prompt empty str", {"prompt":"","max_tokens":2}),
 ("prompt empty list", {"prompt":[],"max_tokens":2}),
 ("prompt neg id", {"prompt":[-1],"max_tokens":2}),
 ("prompt huge id", {"prompt":[10**9],"max_tokens":2}),
 ("prompt id 65535", {"prompt":[65535],"max_tokens":2}),
 ("prompt list of str", {"prompt":["a","b"],"max_tokens":2}),
 ("prompt int", {"prompt":5,"max_tokens":2}),
 ("prompt float ids", {"prompt":[1.5],"max_tokens":2}),
 ("prompt bool ids", {"prompt":[True],"max_tokens":2}),
 ("max_tokens -1", {**base,"max_tokens":-1}),
 ("max_tokens 40960", {**base,"max_tokens":40960}),
 ("max_tokens 40961", {**base,"max_tokens":40961}),
 ("max_tokens 1e30", {**base,"max_tokens":10**30}),
 ("max_tokens str", {**base,"max_tokens":"3"}),
 ("max_tokens 2.5", {**base,"max_tokens":2.5}),
 ("max_tokens 3.0", {**base,"max_tokens":3.0}),
 ("max_tokens null", {**base,"max_tokens":None}),
 ("temperature -0.1", {**base,"temperature":-0.1}),
 ("temperature 2", {**base,"temperature":2}),
 ("temperature 2.01", {**base,"temperature":2.01}),
 ("temperature NaN str", {**base,"temperature":"nan"}),
 ("top_k -1", {**base,"top_k":-1}),
 ("top_k 0", {**base,"top_k":0}),
 ("top_k -2", {**base,"top_k":-2}),
 ("top_k 10**12", {**base,"top_k":10**12}),
 ("top_p 0", {**base,"top_p":0}),
 ("top_p 1.01", {**base,"top_p":1.01}),
 ("top_p -0.01", {**base,"top_p":-0.01}),
 ("presence 10", {**base,"presence_penalty":10}),
 ("presence 10.5", {**base,"presence_penalty":10.5}),
 ("presence -1", {**base,"presence_penalty":-1}),
 ("repetition 11", {**base,"repetition_penalty":11}),
 ("repetition -0.1", {**base,"repetition_penalty":-0.1}),
 ("decay 1.01", {**base,"penalty_decay":1.01}),
 ("decay -0.1", {**base,"penalty_decay":-0.1}),
 ("stream str", {**base,"stream":"yes"}),
 ("stream 1", {**base,"stream":1}),
 ("seed null", {**base,"seed":None}),
 ("seed str", {**base,"seed":"abc"}),
 ("seed -1", {**base,"seed":-1}),
 ("seed 2**64", {**base,"seed":2**64}),
 ("seed 1.5", {**base,"seed":1.5}),
 ("unknown field", {**base,"temprature":0.5}),
 ("min_p 0.5", {**base,"min_p":0.5}),
 ("min_p 1.5", {**base,"min_p":1.5}),
]
for ep in ["/v1/tasks/tmp","/v1/tasks/create"]:
  print("=====", ep)
  for name, body in cases:
    try:
        r = c.post(ep, json=body, timeout=20)
        print(f"{name:22s} {r.status_code} {r.text[:230]}")
    except Exception as e:
        print(name, "EXC", e)
print("===== raw bodies on /v1/tasks/create")
for name, data, ct in [("not json", b"{bad", "application/json"), ("array", b"[1,2]", "application/json"),
                       ("empty", b"", "application/json"), ("text/plain ct", b'{"prompt":"x","max_tokens":1}', "text/plain"),
                       ("null", b"null", "application/json"), ("NaN temp", b'{"prompt":"x","max_tokens":1,"temperature":NaN}', "application/json"),
                       ("Infinity", b'{"prompt":"x","max_tokens":1,"top_p":Infinity}', "application/json"),
                       ("bad utf8", b'{"prompt":"\xff\xfe","max_tokens":1}', "application/json"),
                       ("lone surrogate", b'{"prompt":"\\ud800","max_tokens":1}', "application/json"),
                       ("nul char", b'{"prompt":"a\\u0000b","max_tokens":1}', "application/json")]:
    try:
        r = c.post("/v1/tasks/create", content=data, headers={"content-type":ct}, timeout=20)
        print(f"{name:22s} {r.status_code} {r.text[:250]}")
    except Exception as e:
        print(name, "EXC", e)
