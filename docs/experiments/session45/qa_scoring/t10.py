import httpx, random, time, threading, os, signal, sys
U="http://localhost:8791"
pid=int(open('/tmp/qa45_srv_pid').read())
random.seed(10)
k=int(sys.argv[1]); stream=sys.argv[2]=="1"
ps=[[random.randrange(0,65536) for _ in range(3000)] for _ in range(k)]
res={}
def bg():
    t=time.time()
    try:
        body={"prompt":ps,"echo":True,"logprobs":1,"max_tokens":1,"stream":stream}
        if stream:
            with httpx.stream("POST",U+"/v1/completions",json=body,timeout=120) as r:
                res["r"]=(r.status_code, r.read().decode()[:400], dict(r.headers).get("retry-after"), round(time.time()-t,2))
        else:
            r=httpx.post(U+"/v1/completions",json=body,timeout=120)
            res["r"]=(r.status_code, r.text[:400], r.headers.get("retry-after"), round(time.time()-t,2))
    except Exception as e: res["r"]=("exc", repr(e), round(time.time()-t,2))
th=threading.Thread(target=bg); th.start()
time.sleep(2)
t=time.time(); os.kill(pid, signal.SIGTERM)
th.join()
print(res["r"])
for i in range(60):
    try: os.kill(pid,0)
    except ProcessLookupError: print("process exited after", round(time.time()-t,2),"s"); break
    time.sleep(0.5)
else: print("STILL RUNNING")
