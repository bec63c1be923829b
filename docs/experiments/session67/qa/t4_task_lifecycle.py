import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
r=c.post("/v1/tasks/create", json={"prompt":"Hello","max_tokens":2000}); tid=r.json()["task_id"]
time.sleep(0.5)
show("status running", c.get(f"/v1/tasks/{tid}/status"))
show("get_result running", c.get(f"/v1/tasks/{tid}/get_result"), 200)
show("continue while running", c.post(f"/v1/tasks/{tid}/continue", json={"prompt":"x"}))
show("as_template while running", c.post(f"/v1/tasks/{tid}/as_template"))
show("fork while running", c.post(f"/v1/tasks/{tid}/fork", json={"max_tokens":2}))
show("delete while running", c.post(f"/v1/tasks/{tid}/delete"))
s=c.get(f"/v1/tasks/{tid}/status"); print("status after delete", s.status_code, s.text)
if s.status_code==200:
    t0=time.time(); r=show("stop", c.post(f"/v1/tasks/{tid}/stop")); print("stop took", time.time()-t0)
    n=r.json()["generated_buf"]
    time.sleep(1); s2=c.get(f"/v1/tasks/{tid}/status").json(); print("after 1s", s2, "kept:", s2["generated_buf"]==n)
    show("get_result after stop", c.get(f"/v1/tasks/{tid}/get_result"), 150)
    show("stop again", c.post(f"/v1/tasks/{tid}/stop"))
print("=== query param validation")
r=c.post("/v1/tasks/create", json={"prompt":"Hello","max_tokens":3}); t2=r.json()["task_id"]; wait_done(t2)
for q in ["tmp=maybe","tmp=1","tmp=yes","tmp="]:
    show("fork?"+q, c.post(f"/v1/tasks/{t2}/fork?{q}", json={"max_tokens":1}),200)
for q in ["force=maybe","force=2"]:
    show("delete?"+q, c.post(f"/v1/tasks/{t2}/delete?{q}"),200)
print("=== fork/continue bodies")
for name, body in [("unknown", {"bogus":1}), ("bad temp", {"temperature":5}), ("prompt empty", {"prompt":""}),("prompt null", {"prompt":None}),("array", [1]), ("max_tokens -1", {"max_tokens":-1})]:
    show("fork "+name, c.post(f"/v1/tasks/{t2}/fork", json=body),250)
    show("continue "+name, c.post(f"/v1/tasks/{t2}/continue", json=body),250)
    wait_done(t2)
print("=== as_template names")
r=c.post("/v1/tasks/create", json={"prompt":"Tpl base\n\n","max_tokens":0}); t3=r.json()["task_id"]
for q in ["name=qa67tpl","name=qa67tpl","name=_qa67tpl","name=bad%20name","name=","name="+"a"*101, "name=../x"]:
    show("as_template?"+q, c.post(f"/v1/tasks/{t3}/as_template?{q}"),250)
show("get tpl", c.get("/v1/tasks/_qa67tpl/status"))
show("get_result tpl", c.get("/v1/tasks/_qa67tpl/get_result"))
show("stream tpl", c.get("/v1/tasks/_qa67tpl/stream"))
show("stop tpl", c.post("/v1/tasks/_qa67tpl/stop"))
show("as_template of tpl", c.post("/v1/tasks/_qa67tpl/as_template"))
show("fork tpl tmp", c.post("/v1/tasks/_qa67tpl/fork?tmp=true", json={"prompt":"a","max_tokens":2}))
j=c.get("/v1/tasks/list").json(); print("tpl in cpu_tasks", "_qa67tpl" in j["cpu_tasks"], "in db_tasks", "_qa67tpl" in j["db_tasks"])
show("delete tpl force=1", c.post("/v1/tasks/_qa67tpl/delete?force=1"))
print("=== as_template on TMP")
r=c.post("/v1/tasks/tmp", json={"prompt":"abc","max_tokens":2}); t4=r.json()["task_id"]; wait_done(t4)
show("as_template TMP after gen", c.post(f"/v1/tasks/{t4}/as_template"))
show("continue TMP after gen", c.post(f"/v1/tasks/{t4}/continue", json={"prompt":"x"}))
show("fork TMP after gen", c.post(f"/v1/tasks/{t4}/fork", json={"prompt":"x","max_tokens":1}))
r=c.post("/v1/tasks/tmp", json={"prompt":"abc","max_tokens":0}); t5=r.json()["task_id"]; print(r.text)
r=show("as_template TMP mt0", c.post(f"/v1/tasks/{t5}/as_template"))
if r.status_code==200: c.post(f"/v1/tasks/{r.json()['task_id']}/delete?force=true")
print("=== fim")
for name, body in [("no prefix", {"suffix":"x"}), ("unknown", {"prefix":"a","bogus":1}), ("prompt given", {"prefix":"a","prompt":"b","max_tokens":1}), ("prefix empty", {"prefix":"","max_tokens":1}),("prefix list", {"prefix":[1,2],"max_tokens":1}),("suffix null", {"prefix":"a","suffix":None,"max_tokens":1}),("stream", {"prefix":"a","max_tokens":3,"stream":True})]:
    show("fim "+name, c.post("/v1/tasks/fim", json=body),250)
print("=== list params")
for q in ["", "?offset=0&limit=2", "?limit=-1", "?offset=-1", "?limit=abc", "?limit=100000", "?order=id", "?order=bogus", "?after=TASK_0", "?order=recent&after=TASK_0"]:
    r=c.get("/v1/tasks/list"+q); j=r.json() if r.headers.get('content-type','').startswith('application/json') else None
    print("list"+q, r.status_code, (len(j["db_tasks"]) if isinstance(j,dict) and "db_tasks" in j else r.text[:200]))
print("=== method errors")
show("GET create", c.get("/v1/tasks/create"))
show("POST status", c.post(f"/v1/tasks/{t2}/status"))
show("GET stop", c.get(f"/v1/tasks/{t2}/stop"))
show("bad id chars", c.get("/v1/tasks/%00abc/status"))
show("long id", c.get("/v1/tasks/"+"A"*5000+"/status"))
