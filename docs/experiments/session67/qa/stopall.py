import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
j=c.get("/v1/tasks/list").json()
n=0
for t in j["cpu_tasks"]:
    s=c.get(f"/v1/tasks/{t}/status").json()
    if s.get("status") in (0,1,2):
        r=c.post(f"/v1/tasks/{t}/stop", timeout=60); n+=1
        print(t, s, "->", r.status_code, r.text[:120])
print("stopped", n)
