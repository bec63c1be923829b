import httpx, random, time, threading, os
U="http://localhost:8791"
pid=int(open('/tmp/qa45_srv_pid').read())
def cpu():
    f=open(f'/proc/{pid}/stat').read().split(')')[1].split()
    return (int(f[11])+int(f[12]))/os.sysconf('SC_CLK_TCK')
random.seed(7)
ps=[[random.randrange(0,65536) for _ in range(2000)] for _ in range(60)]
def bg():
    try: httpx.post(U+"/v1/completions",json={"prompt":ps,"echo":True,"logprobs":1,"max_tokens":0},timeout=4)
    except Exception as e: print("bg", type(e).__name__)
th=threading.Thread(target=bg); th.start()
time.sleep(1.5)
a=cpu(); time.sleep(1); b=cpu()
print("during: cpu", round(b-a,2), httpx.get(U+"/health").json()["queue"])
# chat while scoring: streaming timing
t=time.time(); first=None; n=0
with httpx.stream("POST",U+"/v1/chat/completions",json={"messages":[{"role":"user","content":"hi"}],"max_tokens":20,"stream":True},timeout=60) as r:
    for l in r.iter_lines():
        if l.startswith("data: {"):
            n+=1; first=first or time.time()-t
print("chat during scoring: first event", round(first,2), "events", n, "total", round(time.time()-t,2))
th.join()
