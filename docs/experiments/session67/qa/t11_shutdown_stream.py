import httpx, threading, time, os, signal, json
B="http://localhost:8872"; H={"Authorization":"Bearer secret"}
out={}
def run(name, path, body):
    try:
        with httpx.stream("POST", B+path, json=body, headers=H, timeout=60) as r:
            data=b"".join(r.iter_bytes())
        out[name]=(r.status_code, data.decode("utf-8","replace"))
    except Exception as e: out[name]=("EXC", repr(e))
ths=[threading.Thread(target=run,args=("chat","/v1/chat/completions",{"model":"rwkv-7","messages":[{"role":"user","content":"x"}],"max_tokens":3000,"stream":True})),
     threading.Thread(target=run,args=("task","/v1/tasks/create",{"prompt":"x","max_tokens":3000,"stream":True}))]
[t.start() for t in ths]; time.sleep(3)
pid=int(open("/tmp/qa67/server2.pid").read())
os.kill(pid, signal.SIGTERM); t0=time.time()
[t.join(60) for t in ths]; print("joined after", round(time.time()-t0,2))
try:
    r=httpx.post(B+"/v1/tasks/create", json={"prompt":"x","max_tokens":1}, headers=H, timeout=5); print("new req during drain:", r.status_code, r.headers.get("retry-after"), r.text[:200])
except Exception as e: print("new req:", type(e).__name__)
for k,(st,b) in out.items():
    evs=[e for e in b.split("\n\n") if e]
    print(k, st, "n", len(evs)); print("  last3:", [e[:300] for e in evs[-3:]])
