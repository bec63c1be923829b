import httpx, threading, time
U="http://localhost:8791"
res=[]
def go(i, path, body):
    r=httpx.post(U+path, json=body, timeout=120); res.append((i, path, r.status_code, r.headers.get("retry-after"), r.text[:200]))
b1={"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":300}
ths=[threading.Thread(target=go,args=(i,"/v1/chat/completions",b1)) for i in range(4)]
ths+=[threading.Thread(target=go,args=(9,"/v1/tasks/tmp",{"prompt":"x","max_tokens":300}))]
ths+=[threading.Thread(target=go,args=(8,"/v1/completions",{"model":"x","prompt":"x","max_tokens":300,"stream":True}))]
for t in ths: t.start(); time.sleep(0.1)
[t.join() for t in ths]
for r in sorted(res): print(r)
