import httpx, random
U="http://localhost:8791/v1/completions"
c=httpx.Client(timeout=600)
random.seed(2)
long_ids=[random.randrange(1,65000) for _ in range(1300)]
def sc(p,lp=2,mt=0,**kw):
    r=c.post(U,json={"prompt":p,"echo":True,"logprobs":lp,"max_tokens":mt,"temperature":0,**kw}); assert r.status_code==200,r.text
    return r.json()["choices"][0]["logprobs"]["token_logprobs"]
full=sc(long_ids)
for k in (100,512,513,600,1024,1025):
    p=sc(long_ids[:k]); d=max(abs(a-b) for a,b in zip(p[1:],full[1:k]))
    print("prefix",k,"maxdiff vs full",d)
# generation consistency
for k in (100,511,512,513,600,1299):
    r=c.post(U,json={"prompt":long_ids[:k],"max_tokens":1,"temperature":0,"logprobs":1,"echo":True}).json()["choices"][0]["logprobs"]
    g_lp=r["token_logprobs"][-1]; gen_tok_lp=r["token_logprobs"][k]
    # score prompt + generated token: need its id: use top_logprobs? get via token ids endpoint: re-score long_ids[:k+1] if generated equals long_ids[k]? not known; use scored lp of long_ids[k] from full vs top
    top=r["top_logprobs"][k]
    print(k, "gen token", repr(r["tokens"][k]), g_lp, "top", top, "echo last prompt lp", r["token_logprobs"][k-1], "full", full[k-1])
