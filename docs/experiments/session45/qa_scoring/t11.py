import httpx, random, time, threading, json
U="http://localhost:8791"
random.seed(11)
lists=[[[random.randrange(0,65536) for _ in range(random.choice([1,3,200,700,1500]))] for _ in range(12)] for _ in range(3)]
texts=[["Once upon a time "*random.randint(1,60), "", "The answer is 42."] for _ in range(2)]
reqs=[{"prompt":l,"echo":True,"logprobs":2,"max_tokens":random.choice([0,1]),"temperature":0,"n":random.choice([1,2])} for l in lists]+\
     [{"prompt":t,"echo":True,"logprobs":3,"max_tokens":1,"temperature":0,"stream":True} for t in texts]
def call(body):
    if body.get("stream"):
        agg={}
        with httpx.stream("POST",U+"/v1/completions",json=body,timeout=300) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    for ch in json.loads(line[6:])["choices"]:
                        a=agg.setdefault(ch["index"],[])
                        if ch.get("logprobs"): a+=ch["logprobs"]["token_logprobs"]
        return r.status_code,[agg[k] for k in sorted(agg)]
    r=httpx.post(U+"/v1/completions",json=body,timeout=300)
    return r.status_code,[c["logprobs"]["token_logprobs"] for c in r.json()["choices"]]
res=[None]*len(reqs)
def w(i): res[i]=call(reqs[i])
chat_stats=[]
stop=False
def chats():
    while not stop:
        t=time.time(); first=None; gaps=[]; last=None
        with httpx.stream("POST",U+"/v1/chat/completions",json={"messages":[{"role":"user","content":"tell me"}],"max_tokens":30,"stream":True,"ignore_eos":True},timeout=120) as r:
            for l in r.iter_lines():
                if l.startswith("data: {"):
                    now=time.time()
                    if first is None: first=now-t
                    else: gaps.append(now-last)
                    last=now
        chat_stats.append((r.status_code, round(first or -1,2), round(max(gaps) if gaps else 0,2), len(gaps)+1, round(time.time()-t,2)))
ths=[threading.Thread(target=w,args=(i,)) for i in range(len(reqs))]
ct=threading.Thread(target=chats); ct.start()
t0=time.time()
for t in ths: t.start()
for t in ths: t.join()
stop=True; ct.join()
print("concurrent done in", round(time.time()-t0,2))
print("chats (status, ttft, max gap, events, total):", chat_stats)
# solo baseline
bad=0
for i,b in enumerate(reqs):
    st,got=res[i]
    st2,ref=call(b)
    if st!=200 or st2!=200: print("status",i,st,st2); bad+=1; continue
    for j,(g,rf) in enumerate(zip(got,ref)):
        if g!=rf:
            d=[abs(x-y) for x,y in zip(g,rf) if x is not None and y is not None]; pos=[k for k,(x,y) in enumerate(zip(g,rf)) if x!=y]
            print("req",i,"choice",j,"differs; max",max(d) if d else None, "len", len(g), len(rf), "positions", pos[:5], "max_tokens", b["max_tokens"]); bad+=1
    if len(got)!=len(ref): print("nchoices differ",i); bad+=1
print("bad",bad)
