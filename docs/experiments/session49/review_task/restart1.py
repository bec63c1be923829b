# SIGTERM while tasks run / are continued; what is stored after restart
import httpx, json, time, subprocess, sys
B="http://localhost:8791/v1/tasks"
def p(tag, r): print(tag, r.status_code, r.text[:300].replace("\n","|"))
c=httpx.Client(timeout=30)
# 1. a persistent task generating
r=c.post(B+"/create",json={"prompt":"Hello there","max_tokens":40000}); a=r.json()["task_id"]
# 2. a finished task, then continued (long)
r=c.post(B+"/create",json={"prompt":"Hi","max_tokens":5}); b=r.json()["task_id"]
time.sleep(1); p("b-before", c.get(f"{B}/{b}/get_result"))
p("b-cont", c.post(f"{B}/{b}/continue",json={"prompt":" and more","max_tokens":40000}))
# 3. template via as_template
r=c.post(B+"/create",json={"prompt":"Tpl","max_tokens":0}); t=r.json()["task_id"]
p("tpl", r2:=c.post(f"{B}/{t}/as_template?name=keepme"))
time.sleep(1.5)
p("a-status", c.get(f"{B}/{a}/status")); p("b-status", c.get(f"{B}/{b}/status"))
subprocess.run(["review/srv.sh","stop"]); subprocess.run(["review/srv.sh","start"])
c=httpx.Client(timeout=30)
p("a-after", c.get(f"{B}/{a}/status")); p("b-after", c.get(f"{B}/{b}/status"))
p("b-res", c.get(f"{B}/{b}/get_result"))
p("tpl-after", c.get(f"{B}/_keepme/status"))
p("list", c.get(f"{B}/list"))
