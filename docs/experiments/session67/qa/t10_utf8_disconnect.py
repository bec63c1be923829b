import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
# UTF-8: bias the three bytes of "中" (e4 b8 ad = ids 229,185,174)
for ep in ["/v1/tasks/tmp","/v1/tasks/create"]:
  for seed in [1,2,3]:
    st,h,b=sse(ep,"POST",{"prompt":"Hi","max_tokens":40,"stream":True,"seed":seed,"top_k":0,"top_p":1,"presence_penalty":0,"logit_bias":{"229":100,"185":100,"174":100}})
    evs=[e for e in b.split("\n\n") if e]
    if st!=200: print(st,b[:300]); break
    objs=[json.loads(e[6:]) for e in evs if e.startswith("data: {")]
    chunks=[o.get("data","") for o in objs[1:]]
    txt="".join(chunks)
    tid=objs[0]["task_id"]
    gr=c.get(f"/v1/tasks/{tid}/get_result").json()["result"]
    print(ep, seed, "n chunks", len(chunks), "count 中 stream", txt.count("中"), "result", gr.count("中"), "fffd stream", txt.count("\ufffd"), "fffd result", gr.count("\ufffd"), "equal", txt==gr, repr(evs[-1]))
# OpenAI stream with same bias: chat
st,h,b=sse("/v1/completions","POST",{"model":"rwkv-7","prompt":"Hi","max_tokens":40,"stream":True,"seed":1,"logit_bias":{"229":100,"185":100,"174":100},"top_p":1,"top_k":0,"presence_penalty":0})
objs=[json.loads(e[6:]) for e in b.split("\n\n") if e.startswith("data: {")]
txt="".join(o["choices"][0]["text"] for o in objs if o["choices"])
r=c.post("/v1/completions",json={"model":"rwkv-7","prompt":"Hi","max_tokens":40,"seed":1,"logit_bias":{"229":100,"185":100,"174":100},"top_p":1,"top_k":0,"presence_penalty":0}).json()
print("completions stream vs nonstream equal:", txt==r["choices"][0]["text"], txt.count("中"), txt.count("\ufffd"), repr(txt[:40]))
# disconnect cancels (OpenAI)
with c.stream("POST","/v1/chat/completions",json={"model":"rwkv-7","messages":[{"role":"user","content":"x"}],"max_tokens":3000,"stream":True}) as r:
    it=r.iter_lines(); [next(it) for _ in range(6)]
time.sleep(2); print("after chat disconnect health:", {k:v for k,v in c.get("/health").json().items() if k in ("active","queue")})
# disconnect cancels TMP task stream
with c.stream("POST","/v1/tasks/tmp",json={"prompt":"x","max_tokens":3000,"stream":True}) as r:
    it=r.iter_lines(); first=next(it); [next(it) for _ in range(4)]
tid=json.loads(first[6:])["task_id"]
time.sleep(2); print("after tmp disconnect:", c.get(f"/v1/tasks/{tid}/status").text, {k:v for k,v in c.get("/health").json().items() if k in ("active","queue")})
# disconnect of a TASK_ stream (persistent) -- spec silent
with c.stream("POST","/v1/tasks/create",json={"prompt":"x","max_tokens":300,"stream":True}) as r:
    it=r.iter_lines(); first=next(it); [next(it) for _ in range(4)]
tid=json.loads(first[6:])["task_id"]
time.sleep(2); print("after TASK disconnect:", c.get(f"/v1/tasks/{tid}/status").text)
c.post(f"/v1/tasks/{tid}/stop")
# template as model on OpenAI route
tpl=[m["id"] for m in c.get("/v1/models").json()["data"] if ":_" in m["id"]]
if tpl:
    r=c.post("/v1/completions",json={"model":tpl[0],"prompt":"Hi","max_tokens":3}); print("template model:", r.status_code, r.text[:200])
r=c.post("/v1/completions",json={"model":"rwkv-7:_nonexistent","prompt":"Hi","max_tokens":3}); print("rwkv-7:_nonexistent:", r.status_code, r.text[:200])
