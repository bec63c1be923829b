import httpx, random, time, threading
U="http://localhost:8791/v1/completions"
random.seed(12)
ps=[[random.randrange(0,65536) for _ in range(2000)] for _ in range(30)]
out={}
def big():
    t=time.time(); r=httpx.post(U,json={"prompt":ps,"echo":True,"logprobs":1,"max_tokens":0},timeout=300); out["big"]=(r.status_code, round(time.time()-t,2))
th=threading.Thread(target=big); th.start(); time.sleep(0.5)
t=time.time(); r=httpx.post(U,json={"prompt":[1,2,3,4,5,6,7,8,9,10],"echo":True,"logprobs":1,"max_tokens":0},timeout=300)
print("small scoring request while a 30x2000 list scores:", r.status_code, round(time.time()-t,2),"s")
th.join(); print("big", out["big"])
