import httpx, json
U="http://localhost:8791/v1"
c=httpx.Client(timeout=120)
def sse_text(r, key):
    t="";fr=None
    for l in r.text.split("\n\n"):
        if l.startswith("data: ") and l!="data: [DONE]":
            d=json.loads(l[6:])
            for ch in d.get("choices",[]):
                t+= (ch.get("text") if key=="text" else ch["delta"].get("content")) or ""
                fr=ch.get("finish_reason") or fr
    return t,fr
b={"model":"x","prompt":"The story","max_tokens":40,"temperature":0}
full=c.post(U+"/completions", json=b).json()["choices"][0]["text"]
print("full:", repr(full))
stop="Fitzgerald"; print("stop:", repr(stop))
for stream in (False, True):
    r=c.post(U+"/completions", json={**b,"stop":[stop],"stream":stream})
    t,fr=(sse_text(r,"text") if stream else (r.json()["choices"][0]["text"], r.json()["choices"][0]["finish_reason"]))
    print("completions stream" if stream else "completions", repr(t), fr, "expected", repr(full[:full.index(stop)]), t==full[:full.index(stop)])
bc={"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":40,"temperature":0}
full=c.post(U+"/chat/completions", json=bc).json()["choices"][0]["message"]["content"]
print("chat full:", repr(full))
stop=full[10:13]
for stream in (False, True):
    r=c.post(U+"/chat/completions", json={**bc,"stop":stop,"stream":stream})
    t,fr=(sse_text(r,"delta") if stream else (r.json()["choices"][0]["message"]["content"], r.json()["choices"][0]["finish_reason"]))
    print("chat stream" if stream else "chat", repr(t), fr, t==full[:full.index(stop)])
# stop occurring across tokens with emoji
