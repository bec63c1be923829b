import httpx, json, time, sys, threading, os, signal
U="http://localhost:8791"
res={}
def run(k, path, body):
    try:
        with httpx.stream("POST", U+path, json=body, timeout=60) as r:
            res[k]=[l for l in r.iter_lines() if l]
    except Exception as e: res[k]=["EXC "+repr(e)]
def run_ns(k, path, body):
    try:
        r=httpx.post(U+path, json=body, timeout=60); res[k]=[r.status_code, dict(r.headers).get("retry-after"), r.text[:300]]
    except Exception as e: res[k]=["EXC "+repr(e)]
tid=httpx.post(U+"/v1/tasks/create", json={"prompt":"Hi","max_tokens":20000}).json()["task_id"]
ths=[threading.Thread(target=run,args=("chat","/v1/chat/completions",{"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":20000,"stream":True})),
     threading.Thread(target=run,args=("task_stream","/v1/tasks/tmp",{"prompt":"Hi","max_tokens":20000,"stream":True})),
     threading.Thread(target=run_ns,args=("chat_ns","/v1/chat/completions",{"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":20000}))]
[t.start() for t in ths]; time.sleep(2)
os.kill(int(sys.argv[1]), signal.SIGTERM)
[t.join() for t in ths]
for k,v in res.items():
    print("==",k, len(v)); 
    for l in (v[-3:] if isinstance(v,list) else [v]): print("   ", str(l)[:400])
print("task id", tid)
