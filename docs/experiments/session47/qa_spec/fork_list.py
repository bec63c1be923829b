import httpx, time, sqlite3
U="http://localhost:8791/v1/tasks"
c=httpx.Client(timeout=60)
def wait(t):
    for _ in range(300):
        r=c.get(f"{U}/{t}/get_result").json()
        if r["finished"]: return r
        time.sleep(0.05)
a=c.post(U+"/create", json={"prompt":"Hello","max_tokens":10,"temperature":0}).json()["task_id"]; ra=wait(a)
b=c.post(f"{U}/{a}/fork", json={"prompt":" X"}).json()["task_id"]; rb=wait(b)
c.post(f"{U}/{a}/continue", json={"prompt":" X"}); ra2=wait(a)
print("fork==continue:", rb["result"]==ra2["result"], repr(rb["result"][:40]))
s1=c.post(U+"/create", json={"prompt":"Hi","max_tokens":10,"seed":123,"temperature":1.0,"top_p":1}).json()["task_id"]; r1=wait(s1)
s2=c.post(U+"/create", json={"prompt":"Hi","max_tokens":10,"seed":123,"temperature":1.0,"top_p":1}).json()["task_id"]; r2=wait(s2)
s3=c.post(U+"/create", json={"prompt":"Hi","max_tokens":10,"temperature":1.0,"top_p":1}).json()["task_id"]; r3=wait(s3)
s4=c.post(U+"/create", json={"prompt":"Hi","max_tokens":10,"temperature":1.0,"top_p":1}).json()["task_id"]; r4=wait(s4)
print("same seed same:", r1["result"]==r2["result"], " null seeds differ:", r3["result"]!=r4["result"])
for i in range(105):
    while True:
        r=c.post(U+"/create", json={"prompt":f"t{i}","max_tokens":0})
        if r.status_code==200: break
        time.sleep(0.2)
l=c.get(U+"/list").json()
print({k:(v if not isinstance(v,list) else len(v)) for k,v in l.items()})
print("types:", type(l["cpu_tasks"][0]).__name__, type(l["db_tasks"][0]).__name__)
