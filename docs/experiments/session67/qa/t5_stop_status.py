import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
r=c.post("/v1/tasks/create", json={"prompt":"Hello","max_tokens":2000}); tid=r.json()["task_id"]
time.sleep(0.7)
t0=time.time(); r=show("stop", c.post(f"/v1/tasks/{tid}/stop")); print("stop took", round(time.time()-t0,3))
n=r.json()["generated_buf"]
time.sleep(1); s2=c.get(f"/v1/tasks/{tid}/status").json(); print("after 1s", s2, "kept:", s2["generated_buf"]==n)
gr=c.get(f"/v1/tasks/{tid}/get_result").json(); print("finished", gr["finished"], "len", len(gr["result"]))
st,h,b=sse(f"/v1/tasks/{tid}/stream"); print("stream after stop ends:", repr(b[-20:]))
# delete running -> generation stops?
r=c.post("/v1/tasks/create", json={"prompt":"Hello","max_tokens":2000}); t2=r.json()["task_id"]
time.sleep(0.5); print(c.post(f"/v1/tasks/{t2}/delete").text); time.sleep(1.5)
print("health after delete running:", {k:v for k,v in c.get("/health").json().items() if k in ("active","queue")})
# status 0 PREFILL for a long prompt
long = "word " * 6000
r=c.post("/v1/tasks/create", json={"prompt":long,"max_tokens":1}); t3=r.json()["task_id"]
seen=[]
for i in range(200):
    s=c.get(f"/v1/tasks/{t3}/status").json()["status"]
    if not seen or seen[-1]!=s: seen.append(s)
    if s==3: break
    time.sleep(0.02)
print("status sequence long prompt:", seen, "reply", r.text[:200])
print(c.get(f"/v1/tasks/{t3}/get_result").text[:300])
# streaming a running task started from second client, with pos beyond current
r=c.post("/v1/tasks/create", json={"prompt":"Hello","max_tokens":60}); t4=r.json()["task_id"]
st,h,b=sse(f"/v1/tasks/{t4}/stream?pos=30")
e=[x for x in b.split("\n\n") if x]; print("pos=30 live:", st, len(e), e[0][:100], e[-1])
full=c.get(f"/v1/tasks/{t4}/get_result").json()["result"]
t="".join(json.loads(x[6:]).get("data","") for x in e if x.startswith("data: {")); print("suffix:", full.endswith(t), len(t), len(full))
