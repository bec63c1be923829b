import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
import threading
def parse(body):
    evs = body.split("\n\n")
    return evs
for path in ["/v1/tasks/tmp", "/v1/tasks/create"]:
    st, h, body = sse(path, "POST", {"prompt":"Hello world","max_tokens":40,"stream":True})
    print("==", path, st, h.get("content-type"), "cache-control", h.get("cache-control"), "enc", h.get("content-encoding"), "x-accel", h.get("x-accel-buffering"))
    evs=[e for e in body.split("\n\n") if e]
    print("n events", len(evs)); print(repr(evs[0])); print(repr(evs[1]) if len(evs)>1 else None); print(repr(evs[-2])); print(repr(evs[-1]))
    print("ends with \\n\\n:", body.endswith("\n\n"))
    nonjson=[e for e in evs[:-1] if not e.startswith("data: {")]
    print("non-json or non-data events:", nonjson[:3])
    objs=[json.loads(e[6:]) for e in evs if e.startswith("data: {")]
    print("keys first", list(objs[0].keys()), "types", {k:type(v).__name__ for k,v in objs[0].items()})
    if len(objs)>1: print("keys chunk", list(objs[1].keys()), {k:type(v).__name__ for k,v in objs[1].items()})
    txt="".join(o.get("data","") for o in objs)
    print("fffd in text:", "\ufffd" in txt, "len", len(txt))
    tid=objs[0]["task_id"]
    gr=c.get(f"/v1/tasks/{tid}/get_result").json()
    print("get_result matches stream text:", gr["result"]==txt, gr["finished"])
    st2,h2,b2 = sse(f"/v1/tasks/{tid}/stream")
    e2=[e for e in b2.split("\n\n") if e]
    print("replay stream:", st2, h2.get("content-type"), len(e2), repr(e2[0])[:150], repr(e2[-1]))
    t2="".join(json.loads(e[6:]).get("data","") for e in e2 if e.startswith("data: {"))
    print("replay equal:", t2==txt)
    st3,h3,b3 = sse(f"/v1/tasks/{tid}/stream?pos=10")
    e3=[e for e in b3.split("\n\n") if e]
    t3="".join(json.loads(e[6:]).get("data","") for e in e3 if e.startswith("data: {"))
    print("pos=10:", st3, len(e3), repr(e3[0])[:150], "suffix of full:", txt.endswith(t3), len(t3), len(txt))
    for q in ["pos=-1","pos=abc","pos=100000","pos=1.5"]:
        st4,h4,b4=sse(f"/v1/tasks/{tid}/stream?{q}")
        print(q, st4, b4[:200].replace("\n","\\n"))
# multiple subscribers while running
r=c.post("/v1/tasks/create", json={"prompt":"Hello","max_tokens":300})
tid=r.json()["task_id"]
res={}
def sub(i):
    res[i]=sse(f"/v1/tasks/{tid}/stream")
ths=[threading.Thread(target=sub,args=(i,)) for i in range(3)]
[t.start() for t in ths]; [t.join(120) for t in ths]
texts=[]
for i in range(3):
    st,h,b=res[i]; e=[x for x in b.split("\n\n") if x]
    texts.append("".join(json.loads(x[6:]).get("data","") for x in e if x.startswith("data: {")))
    print("sub",i,st,len(e),repr(e[-1]))
print("all equal:", len(set(texts))==1, len(texts[0]))
print(c.get(f"/v1/tasks/{tid}/get_result").json()["result"]==texts[0])
