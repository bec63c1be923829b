import json, httpx
from harness import send, flags, c
tid = c.post("/v1/tasks/create", json={"prompt": "hello", "max_tokens": 3}).json()["task_id"]
import time; time.sleep(1)
tmpl = c.post("/v1/tasks/create", json={"prompt": "hello", "max_tokens": 0}).json()["task_id"]
time.sleep(1)
tmpl = c.post(f"/v1/tasks/{tmpl}/as_template").json()["task_id"]
print("ids", tid, tmpl)
ids = [tid, tmpl, "TASK_" + "0"*32, "TMP_" + "z"*32, "_", "_" + "a"*5000, "%00", "%ff", "%ed%a0%80", "..", "%2e%2e", "a%2Fb", "%2F", "x"*100000, "TASK_%0A", "%20", "'; DROP TABLE tasks;--", "\u00e9", "%F0%9F%98%80", "list", "tmp", "import_state", "_TMPL_%00"]
subs = [("GET","get_result"),("GET","stream"),("GET","status"),("POST","fork"),("POST","continue"),("POST","stop"),("POST","as_template"),("GET","export_state"),("POST","delete")]
for i in ids:
    for m, s in subs:
        if s == "delete" and i in (tid, tmpl): continue
        send(f"{m} id={i[:30]} {s}", m, f"/v1/tasks/{i}/{s}", body={} if m == "POST" else None)
qs = ["pos=-1", "pos=1e10", "pos=99999999999999999999999", "pos=abc", "pos=", "pos=1&pos=2", "pos=%00", "pos=NaN", "pos=Infinity", "pos=3.0", "pos=0x10", "pos=%2B1", "pos=1_0", "pos=%EF%BC%91", "pos=" + "9"*5000]
for q in qs:
    send(f"stream {q[:40]}", "GET", f"/v1/tasks/{tid}/stream?{q}")
fq = ["tmp=maybe", "tmp=", "tmp=1", "tmp=on", "tmp=true&tmp=false", "tmp=%00", "tmp=" + "t"*10000]
for q in fq:
    send(f"fork {q[:40]}", "POST", f"/v1/tasks/{tid}/fork?{q}", body={"max_tokens": 1})
    send(f"delete tmpl {q[:40].replace('tmp','force')}", "POST", f"/v1/tasks/{tmpl}/delete?{q.replace('tmp','force')}")
lq = ["limit=-1", "offset=-1", "limit=99999999999999999999", "page=x", "a=" + "b"*100000, "&"*10000]
for q in lq:
    send(f"list {q[:40]}", "GET", f"/v1/tasks/list?{q}")
for q in ["name=", "name=%00", "name=_x", "name=" + "n"*5000, "name=TASK_x", "name=a/b", "name=_a&name=_b"]:
    send(f"import {q[:40]}", "POST", f"/v1/tasks/import_state?{q}", raw=b"notafile", headers={"content-type":"application/octet-stream"})
for p in ["/v1/models/%00", "/v1/models/%ff", "/v1/models/" + "m"*100000, "/v1/models/rwkv-7:_", "/v1/models/rwkv-7:%00", "/v1/models/rwkv-7:_" + tmpl[1:], "/v1/models/..%2F..", "/v1/models/a/b", "/v1//models", "//v1/models", "/v1/models?x=%ff", "/health?x=1", "/metrics?name[]=x", "/v1/tasks/", "/v1/tasks", "/v1/tasksX", "/v1/chat/completions/"]:
    send(f"GET {p[:50]}", "GET", p)
for p in ["/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/tasks/list", "/v1/tasks/tmp"]:
    for m in ["PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "FOO"]:
        send(f"{m} {p}", m, p)
print("FLAGS", len(flags))
for f in flags: print(f)
