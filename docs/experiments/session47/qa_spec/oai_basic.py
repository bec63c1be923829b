import httpx, json
U="http://localhost:8791/v1"
c=httpx.Client(timeout=120)
def sse(r):
    raw=r.text
    assert raw.endswith("\n\n"), repr(raw[-30:])
    evs=[]
    for e in raw.split("\n\n")[:-1]:
        lines=e.split("\n")
        for l in lines:
            if l.startswith(":"): continue
            assert l.startswith("data: "), ("BAD LINE", l)
            evs.append(l[6:])
    return evs
def chk_stream(body, label, path="/chat/completions"):
    r=c.post(U+path, json=body, headers={"Accept-Encoding":"gzip"})
    print(f"== {label}: {r.status_code} ct={r.headers.get('content-type')} ce={r.headers.get('content-encoding')}")
    if r.status_code!=200: print(r.text[:400]); return None
    evs=sse(r)
    assert evs[-1]=="[DONE]", evs[-1]
    chunks=[json.loads(e) for e in evs[:-1]]
    ids={(ch.get("id"),ch.get("created"),ch.get("model")) for ch in chunks}
    if len(ids)!=1: print("  DIFFERENT id/created/model", ids)
    roles=[i for i,ch in enumerate(chunks) for cc in ch.get("choices",[]) if "role" in cc.get("delta",{})]
    return chunks, roles
# stream vs nonstream equivalence
for eff in ["none", None]:
    base={"model":"rwkv-7","messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":60,"seed":42,"temperature":1.0}
    if eff: base["reasoning_effort"]=eff
    ns=c.post(U+"/chat/completions", json=base).json()
    chunks,roles=chk_stream({**base,"stream":True}, f"chat stream eff={eff}")
    content="".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch["choices"])
    reas="".join(ch["choices"][0]["delta"].get("reasoning_content") or "" for ch in chunks if ch["choices"])
    m=ns["choices"][0]["message"]
    print("  roles at", roles, "first delta", chunks[0]["choices"][0]["delta"], "last", chunks[-1]["choices"][0])
    print("  eq content", content==(m.get("content") or ""), "eq reasoning", reas==(m.get("reasoning_content") or ""), "fr", ns["choices"][0]["finish_reason"])
    print("  usage in chunks:", any("usage" in ch for ch in chunks))
    for ch in chunks:
        for cc in ch["choices"]:
            if "delta" not in cc: print("  NO DELTA", ch)
# include_usage
chunks,roles=chk_stream({"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":10,"stream":True,"stream_options":{"include_usage":True},"reasoning_effort":"none"}, "include_usage")
print("  usage per chunk:", [ch.get("usage","MISSING") for ch in chunks][:3], "... last:", chunks[-1])
# include_usage false
chunks,roles=chk_stream({"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"stream":True,"stream_options":{"include_usage":False}}, "include_usage false")
print("  any usage key:", any("usage" in ch for ch in chunks))
# n
r=c.post(U+"/chat/completions", json={"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"n":3,"seed":1,"reasoning_effort":"none"}).json()
print("== n=3 indexes", [ch["index"] for ch in r["choices"]], r["usage"])
chunks,roles=chk_stream({"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"n":3,"seed":1,"stream":True,"reasoning_effort":"none","stream_options":{"include_usage":True}}, "n=3 stream")
from collections import defaultdict
per=defaultdict(list)
for ch in chunks:
    for cc in ch["choices"]: per[cc["index"]].append(cc)
for i,l in per.items():
    print("  idx",i,"role count",sum("role" in x["delta"] for x in l),"final",l[-1])
    txt="".join(x["delta"].get("content") or "" for x in l)
    print("   eq nonstream:", txt==r["choices"][i]["message"]["content"])
print("  last chunk", chunks[-1])
# completions stream vs nonstream
b={"model":"x","prompt":"Once upon","max_tokens":30,"seed":7}
ns=c.post(U+"/completions", json=b).json()
chunks,_=chk_stream({**b,"stream":True},"completions stream","/completions")
txt="".join(ch["choices"][0]["text"] for ch in chunks if ch["choices"])
print("  eq", txt==ns["choices"][0]["text"], "keys", [sorted(ch["choices"][0].keys()) for ch in chunks[:1]], chunks[-1]["choices"])
chunks,_=chk_stream({**b,"stream":True,"stream_options":{"include_usage":True}},"completions include_usage","/completions")
print("  usage per chunk", [ch.get("usage","MISSING") for ch in chunks][:2], chunks[-1])
