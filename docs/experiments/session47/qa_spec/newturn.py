import httpx, json
from server.model.tokenizer import Tokenizer
tok=Tokenizer("eof_v20230424.txt")
ids={s:tok.encode(s) for s in ["\n\n","User",":","Hello"]}
print(ids)
U="http://localhost:8791/v1"
lb={str(ids["Hello"][0]):100, str(ids["\n\n"][0]):99, str(ids["User"][0]):98, str(ids[":"][0]):97}
for stream in (False, True):
    b={"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":12,"temperature":0,"presence_penalty":2,"frequency_penalty":2,"logit_bias":lb,"reasoning_effort":"none","stream":stream}
    r=httpx.post(U+"/chat/completions", json=b, timeout=60)
    print(r.text[:1500])
b={"model":"x","prompt":"Hi","max_tokens":12,"temperature":0,"presence_penalty":2,"frequency_penalty":2,"logit_bias":lb}
print("completions (no turn stop expected):", httpx.post(U+"/completions", json=b, timeout=60).json()["choices"][0])
