import httpx, random, time, threading, os, json
U="http://localhost:8791"
pid=int(open('/tmp/qa45_srv_pid').read())
def cpu():
    # sum utime+stime of the process tree (main python)
    f=open(f'/proc/{pid}/stat').read().split(')')[1].split()
    return (int(f[11])+int(f[12]))/os.sysconf('SC_CLK_TCK')
random.seed(6)
ps=[[random.randrange(0,65536) for _ in range(2000)] for _ in range(60)]
c=httpx.Client(timeout=httpx.Timeout(3.0))
t=time.time()
try:
    c.post(U+"/v1/completions",json={"prompt":ps,"echo":True,"logprobs":1,"max_tokens":0,"stream":True})
except Exception as e: print("client timeout/closed", type(e).__name__, round(time.time()-t,2))
c.close()
c2=httpx.Client(timeout=60)
for k in range(8):
    a=cpu(); time.sleep(1); b=cpu()
    h=c2.get(U+"/health").json()
    print(f"t+{k+1}s cpu {b-a:.2f} queue {h['queue']} active {h['active']}")
t=time.time()
r=c2.post(U+"/v1/chat/completions",json={"messages":[{"role":"user","content":"hi"}],"max_tokens":8})
print("chat",r.status_code, round(time.time()-t,2), r.json()["choices"][0]["message"]["content"][:40] if r.status_code==200 else r.text)
