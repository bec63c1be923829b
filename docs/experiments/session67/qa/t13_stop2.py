import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
CO="/v1/completions"; CH="/v1/chat/completions"
lb={"121":100}
for stop in ["x", "xxx", ["q","xx"]]:
    r=c.post(CO,json={"model":"rwkv-7","prompt":"Hi","max_tokens":10,"logit_bias":lb,"stop":stop,"presence_penalty":0}).json()
    print("completions stop",stop, repr(r["choices"][0]["text"]), r["choices"][0]["finish_reason"], r["usage"])
    st,h,b=sse(CO,"POST",{"model":"rwkv-7","prompt":"Hi","max_tokens":10,"logit_bias":lb,"stop":stop,"presence_penalty":0,"stream":True})
    objs=[json.loads(e[6:]) for e in b.split("\n\n") if e.startswith("data: {")]
    print("   stream:", repr("".join(o["choices"][0]["text"] for o in objs if o["choices"])), [o["choices"][0]["finish_reason"] for o in objs if o["choices"]][-1])
    r=c.post(CH,json={"model":"rwkv-7","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"none","max_tokens":10,"logit_bias":lb,"stop":stop,"presence_penalty":0}).json()
    print("   chat:", repr(r["choices"][0]["message"]["content"]), r["choices"][0]["finish_reason"])
r=c.post(CO,json={"model":"rwkv-7","prompt":"Hi","max_tokens":10,"logit_bias":lb,"presence_penalty":0,"frequency_penalty":0}).json()
print("no stop:", repr(r["choices"][0]["text"]))
