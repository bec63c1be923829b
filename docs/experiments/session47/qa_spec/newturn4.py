import httpx, json
from server.model.tokenizer import Tokenizer
tok=Tokenizer("eof_v20230424.txt")
gt=tok.encode(">")[0]; hello=tok.encode(" Hello")[0]
print("ids > ", gt, " Hello", hello)
U="http://localhost:8791/v1"
# first token '>' (huge), then ' Hello', then '\n\n', then 'User' -- order forced by penalties
lb={str(gt):100,str(hello):99,"261":98,"24281":97}
for eff in ("none","high"):
  for stream in (False, True):
    b={"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":20,"temperature":0,"logit_bias":lb,"frequency_penalty":2,"presence_penalty":2,"reasoning_effort":eff,"stream":stream}
    r=httpx.post(U+"/chat/completions", json=b, timeout=60)
    if not stream:
        ch=r.json()["choices"][0]; print(eff, "nonstream", ch["finish_reason"], r.json()["usage"]["completion_tokens"], json.dumps(ch["message"]))
    else:
        evs=[json.loads(l[6:]) for l in r.text.split("\n\n") if l.startswith("data: {")]
        print(eff, "stream", [ (e["choices"][0]["delta"], e["choices"][0]["finish_reason"]) for e in evs if e["choices"]])
