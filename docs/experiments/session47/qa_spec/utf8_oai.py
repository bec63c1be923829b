import httpx, json
U="http://localhost:8791/v1"
c=httpx.Client(timeout=120)
bad=0
for seed in range(4):
    for path, body, key in [("/completions", {"model":"x","prompt":"中文😀 ","max_tokens":250,"seed":seed,"temperature":1.5,"top_p":1,"top_k":0}, "text"),
                            ("/chat/completions", {"model":"x","messages":[{"role":"user","content":"中文😀"}],"max_tokens":250,"seed":seed,"temperature":1.5,"top_p":1,"top_k":0}, "content")]:
        ns=c.post(U+path, json=body).json()["choices"][0]
        ns_t=ns.get("text") if key=="text" else ns["message"]["content"]
        r=c.post(U+path, json={**body,"stream":True})
        parts=[]
        for l in r.text.split("\n\n"):
            if l.startswith("data: {"):
                d=json.loads(l[6:])
                for ch in d["choices"]:
                    p=ch.get("text") if key=="text" else ch["delta"].get("content")
                    if p: parts.append(p)
        st="".join(parts)
        f_ns=ns_t.count("\ufffd"); f_st=sum(p.count("\ufffd") for p in parts)
        ok= st==ns_t and f_ns==f_st
        if not ok: bad+=1
        print(path, seed, "equal", st==ns_t, "fffd ns/stream", f_ns, f_st, "chunks", len(parts))
print("bad", bad)
