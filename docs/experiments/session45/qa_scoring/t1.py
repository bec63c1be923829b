import httpx, json, random, time, sys
U="http://localhost:8791/v1/completions"
c=httpx.Client(timeout=300)
def post(body):
    r=c.post(U,json=body); 
    return r
random.seed(1)
long_ids=[random.randrange(1,65000) for _ in range(1300)]
prompts=["Hello world, this is a test.", "", "中文 text 😀 mixed", "a", "The quick brown fox jumps over the lazy dog. "*5]
def single(p, lp=3, mt=0):
    r=post({"model":"rwkv-7","prompt":p,"echo":True,"logprobs":lp,"max_tokens":mt,"temperature":0})
    assert r.status_code==200, (r.status_code, r.text[:300])
    return r.json()["choices"][0]
def cmp(a,b,label):
    la,lb=a["logprobs"],b["logprobs"]
    diffs=[]
    if la["tokens"]!=lb["tokens"]: print(label,"TOKENS DIFFER", len(la["tokens"]),len(lb["tokens"]))
    for k in ("token_logprobs",):
        for i,(x,y) in enumerate(zip(la[k],lb[k])):
            if x!=y: diffs.append((i,x,y, None if x is None or y is None else abs(x-y)))
    if la["text_offset"]!=lb["text_offset"]: print(label,"offset differ")
    if la["top_logprobs"]!=lb["top_logprobs"]:
        print(label,"top differ")
    if diffs: print(label,"DIFFS",len(diffs),"max",max(d[3] or 0 for d in diffs), diffs[:3])
    return not diffs
def check_choice(ch, prompt_text):
    lp=ch["logprobs"]
    toks=lp["tokens"]; offs=lp["text_offset"]
    joined="".join(toks)
    if prompt_text is not None and not ch["text"].startswith(prompt_text):
        print("echo text mismatch", repr(ch["text"][:50]), repr(prompt_text[:50]))
    # offsets
    pos=0; bad=0
    for t,o in zip(toks,offs):
        if o!=pos: bad+=1
        pos+=len(t)
    if bad: print("offset mismatch count",bad, offs[:5])
    if joined!=ch["text"]: print("joined tokens != text", repr(joined[:80]), repr(ch["text"][:80]))
    if lp["token_logprobs"] and lp["token_logprobs"][0] is not None and prompt_text: print("first not null", lp["token_logprobs"][:2])
for mt in (0,1):
  for n in (1,2):
    allp=prompts+[long_ids]
    t=time.time()
    r=post({"model":"rwkv-7","prompt":[p if isinstance(p,str) else None for p in prompts] and prompts,"echo":True,"logprobs":3,"max_tokens":mt,"n":n,"temperature":0})
    print("mt",mt,"n",n,r.status_code, round(time.time()-t,2))
    ch=r.json()["choices"]
    idx=[x["index"] for x in ch]; print("indexes", idx)
    for i,p in enumerate(prompts):
        s=single(p,3,mt)
        for j in range(n):
            cc=ch[i*n+j]
            check_choice(cc,p)
            # compare prompt part only (mt tokens generated)
            L=len(s["logprobs"]["tokens"])-mt
            a={"logprobs":{k:cc["logprobs"][k][:L] for k in ("tokens","token_logprobs","text_offset","top_logprobs")}}
            b={"logprobs":{k:s["logprobs"][k][:L] for k in ("tokens","token_logprobs","text_offset","top_logprobs")}}
            cmp(a,b,f"p{i} n{j}")
print("done")
