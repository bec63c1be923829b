import httpx, json, random, time
U="http://localhost:8791/v1/completions"
c=httpx.Client(timeout=600)
random.seed(2)
long_ids=[random.randrange(1,65000) for _ in range(1300)]
short_ids=[[random.randrange(1,65000) for _ in range(k)] for k in (1,2,5,33,511,512,513)]
def sc(p,lp=2,mt=0,n=1,stream=False):
    r=c.post(U,json={"prompt":p,"echo":True,"logprobs":lp,"max_tokens":mt,"n":n,"temperature":0})
    return r
def lps(ch): return ch["logprobs"]["token_logprobs"], ch["logprobs"]["top_logprobs"], ch["logprobs"]["tokens"]
lst=[short_ids[0], long_ids, short_ids[1], [], short_ids[2], short_ids[3],short_ids[4],short_ids[5],short_ids[6]]
t=time.time(); r=sc(lst); print("list", r.status_code, round(time.time()-t,2)); 
if r.status_code!=200: print(r.text[:500])
ch=r.json()["choices"]; print([x["index"] for x in ch], [len(x["logprobs"]["tokens"]) for x in ch])
for i,p in enumerate(lst):
    if not p: 
        print(i,"empty ->", repr(ch[i]["text"]), ch[i]["logprobs"]); continue
    s=sc(p).json()["choices"][0]
    a,b=lps(ch[i]),lps(s)
    if a==b: print(i,len(p),"equal"); continue
    d=[abs(x-y) for x,y in zip(a[0][1:],b[0][1:])]
    print(i,len(p),"DIFF max",max(d), "count",sum(1 for x in d if x), "first idx", next(k for k,x in enumerate(d) if x)+1, "toks equal",a[2]==b[2], "top equal", a[1]==b[1])
