import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
def types(d): return {k:(type(v).__name__) for k,v in d.items()}
r=show("models", c.get("/v1/models"), 600); j=r.json(); print(types(j), types(j["data"][0]))
show("models/rwkv-7", c.get("/v1/models/rwkv-7"))
show("models/none", c.get("/v1/models/nonexistent"))
msgs=[{"role":"user","content":"Hi"}]
r=show("chat nonstream", c.post("/v1/chat/completions", json={"model":"rwkv-7","messages":msgs,"max_tokens":8}), 900)
j=r.json(); print(types(j)); ch=j["choices"][0]; print(types(ch), types(ch["message"]), j["usage"])
r=show("chat nonstream none", c.post("/v1/chat/completions", json={"model":"rwkv-7","messages":msgs,"max_tokens":8,"reasoning_effort":"none"}), 900)
r=show("completions", c.post("/v1/completions", json={"model":"rwkv-7","prompt":"Hello","max_tokens":5}), 900)
j=r.json(); print(types(j), types(j["choices"][0]))
# streaming chat
def stream_check(path, body, label):
    st,h,b=sse(path,"POST",body)
    print(f"=== {label}: {st} ct={h.get('content-type')} enc={h.get('content-encoding')}")
    lines=b.split("\n")
    bad=[l for l in lines if l and not l.startswith("data: ") and not l.startswith(":")]
    print("non-data lines:", bad[:3])
    evs=[e for e in b.split("\n\n") if e]
    multi=[e for e in evs if e.count("\n")>0]; print("multiline events:", multi[:2])
    print("last:", repr(evs[-1]), "second last:", evs[-2][:300])
    objs=[json.loads(e[6:]) for e in evs if e.startswith("data: {")]
    print("first:", json.dumps(objs[0])[:400])
    ids={(o.get("id"),o.get("created"),o.get("model"),o.get("object")) for o in objs}; print("distinct id/created/model/object:", ids)
    roles=[i for i,o in enumerate(objs) for c_ in o.get("choices",[]) if "role" in c_.get("delta",{})]; print("role at chunks:", roles)
    nochoice=[o for o in objs if "choices" not in o]; print("no choices chunks:", nochoice[:1])
    nodelta=[o for o in objs for c_ in o.get("choices",[]) if "delta" not in c_ and "text" not in c_]; print("choices without delta/text:", nodelta[:1])
    fin=[(i,c_.get("finish_reason"), c_.get("delta")) for i,o in enumerate(objs) for c_ in o.get("choices",[]) if c_.get("finish_reason")]; print("finish:", fin, "n objs", len(objs))
    usage=[(i,o.get("usage")) for i,o in enumerate(objs) if "usage" in o]; print("usage keys at:", [(i,u) for i,u in usage][-2:], "count", len(usage))
    return objs
stream_check("/v1/chat/completions", {"model":"rwkv-7","messages":msgs,"max_tokens":10,"stream":True}, "chat stream")
stream_check("/v1/chat/completions", {"model":"rwkv-7","messages":msgs,"max_tokens":10,"stream":True,"reasoning_effort":"none"}, "chat stream none")
stream_check("/v1/chat/completions", {"model":"rwkv-7","messages":msgs,"max_tokens":10,"stream":True,"reasoning_effort":"none","stream_options":{"include_usage":True}}, "chat stream usage")
stream_check("/v1/chat/completions", {"model":"rwkv-7","messages":msgs,"max_tokens":6,"stream":True,"reasoning_effort":"none","n":2}, "chat stream n=2")
stream_check("/v1/completions", {"model":"rwkv-7","prompt":"Hello","max_tokens":6,"stream":True}, "completions stream")
stream_check("/v1/completions", {"model":"rwkv-7","prompt":"Hello","max_tokens":6,"stream":True,"stream_options":{"include_usage":True}}, "completions stream usage")
