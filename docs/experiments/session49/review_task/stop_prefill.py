# stop a task mid-prefill: are the prompt's unfed tokens kept (history + pending == prompt)?
import httpx, json, time, struct, random
B="http://localhost:8791/v1/tasks"
c=httpx.Client(timeout=60)
random.seed(0)
prompt=[random.randrange(1,60000) for _ in range(30000)]
r=c.post(B+"/create",json={"prompt":prompt,"max_tokens":5}); tid=r.json()["task_id"]
for i in range(100):
    s=c.get(f"{B}/{tid}/status").json()
    if s["status"]!=0 or i>3: break
    time.sleep(0.05)
print("before stop", s)
print("stop", c.post(f"{B}/{tid}/stop").json())
d=c.get(f"{B}/{tid}/export_state").content
(n,)=struct.unpack("<Q",d[:8]); meta=json.loads(d[8:8+n])["__metadata__"]
hist=json.loads(meta["history"]); pend=json.loads(meta.get("pending","[]")); cur=json.loads(meta["current_token"])
print("history",len(hist),"pending",len(pend),"current",cur)
seq=hist+pend+([] if cur is None else [cur])
print("sequence == prompt prefix:", seq[:len(prompt)]==prompt, "len", len(seq))
print(c.get(f"{B}/{tid}/get_result").json())
