import httpx, random, time
U="http://localhost:8791/v1/completions"
c=httpx.Client(timeout=600)
random.seed(5)
ps=[[random.randrange(0,65536) for _ in range(random.choice([0,1,2,50,300,600]))] for _ in range(50)]
t=time.time()
r=c.post(U,json={"prompt":ps,"echo":True,"logprobs":5,"max_tokens":0,"n":2,"temperature":0})
print(r.status_code, round(time.time()-t,2))
ch=r.json()["choices"]
print(len(ch), [x["index"] for x in ch]==list(range(100)))
bad=0
for i,p in enumerate(ps):
    for j in range(2):
        if len(ch[2*i+j]["logprobs"]["tokens"])!=len(p): print("len mismatch",i); bad+=1
    if not p: continue
    s=c.post(U,json={"prompt":p,"echo":True,"logprobs":5,"max_tokens":0}).json()["choices"][0]["logprobs"]
    if s!=ch[2*i]["logprobs"] or s!=ch[2*i+1]["logprobs"]:
        bad+=1; print("diff",i,len(p))
print("bad",bad)
