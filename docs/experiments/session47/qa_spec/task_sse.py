import httpx, json, threading, time
B="http://localhost:8791/v1/tasks"
c=httpx.Client(timeout=60)
def parse(raw):
    assert raw.endswith("\n\n"), repr(raw[-20:])
    evs=raw.split("\n\n")[:-1]
    out=[]
    for e in evs:
        assert e.startswith("data: "), repr(e)
        assert "\n" not in e, repr(e)
        out.append(e[6:])
    return out
bad=0; mism=0
for i in range(6):
    r=c.post(B+"/create", json={"prompt":"中文测试 😀 "*3,"max_tokens":200,"stream":True,"temperature":1.5,"seed":i})
    evs=parse(r.text)
    assert evs[-1]=="[DONE]", evs[-1]
    first=json.loads(evs[0]); assert set(first)=={"task_id","prefill_time"}, first
    tid=first["task_id"]
    txt=""
    for e in evs[1:-1]:
        d=json.loads(e)
        if set(d)!={"data","task_id","gen_time","speed"}: print("keys",d.keys())
        if "\ufffd" in d["data"]: bad+=1; print("FFFD chunk", repr(d["data"]))
        txt+=d["data"]
    res=c.get(f"{B}/{tid}/get_result").json()
    if res["result"]!=txt: mism+=1; print("mismatch", len(res["result"]), len(txt))
    # replay
    rr=parse(c.get(f"{B}/{tid}/stream").text)
    t2="".join(json.loads(e)["data"] for e in rr[1:-1] if "data" in json.loads(e))
    if t2!=txt: print("replay mismatch")
    st=c.get(f"{B}/{tid}/status").json()
    print(tid, "events",len(evs),"fffd_in_result", "\ufffd" in res["result"], "buf",st["generated_buf"], "finished",res["finished"])
print("bad",bad,"mism",mism)
# multiple subscribers while running
r=c.post(B+"/create", json={"prompt":"Hello","max_tokens":400,"seed":3}).json(); tid=r["task_id"]
outs={}
def sub(k, pos=0):
    outs[k]=parse(httpx.get(f"{B}/{tid}/stream", params={"pos":pos}, timeout=60).text)
ths=[threading.Thread(target=sub,args=(k,)) for k in range(4)]+[threading.Thread(target=sub,args=("p50",50))]
[t.start() for t in ths]; [t.join() for t in ths]
texts={k:"".join(json.loads(e).get("data","") for e in v[1:-1]) for k,v in outs.items()}
full=c.get(f"{B}/{tid}/get_result").json()["result"]
print("subscribers equal:", all(texts[k]==full for k in range(4)), "pos50 suffix:", full.endswith(texts["p50"]), len(full), len(texts["p50"]))
print("last events:", [v[-1] for v in outs.values()])
