import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
for f in ["max_tokens","temperature","top_k","top_p","presence_penalty","repetition_penalty","penalty_decay","stream","seed","min_p"]:
    r=c.post("/v1/tasks/tmp", json={"prompt":"x","max_tokens":1,f:None} if f!="max_tokens" else {"prompt":"x",f:None})
    tid=r.json().get("task_id") if r.status_code==200 else None
    if tid and f=="max_tokens": c.post(f"/v1/tasks/{tid}/stop")
    print(f"{f:20s} null -> {r.status_code} {r.text[:150]}")
r=c.post("/v1/tasks/fim", json={"prefix":"a","suffix":"b","max_tokens":1,"temperature":None}); print("fim temp null", r.status_code)
