import httpx, random, time
U="http://localhost:8791/v1/completions"
c=httpx.Client(timeout=120)
random.seed(8)
def P(k,L=600): return [[random.randrange(0,65536) for _ in range(L)] for _ in range(k)]
def go(label, body):
    t=time.time(); r=c.post(U,json=body)
    print(label, r.status_code, round(time.time()-t,2), dict((k,v) for k,v in r.headers.items() if k.lower() in ("retry-after","x-should-retry")), r.text[:260] if r.status_code!=200 else "")
    return r
go("5 prompts (> max_in_flight 3)", {"prompt":P(5),"echo":True,"logprobs":1,"max_tokens":0})
go("immediately after: 3 prompts", {"prompt":P(3),"echo":True,"logprobs":1,"max_tokens":0})
go("2 prompts n=2 (4 choices>3)", {"prompt":P(2,3000),"echo":True,"logprobs":1,"max_tokens":0,"n":2})
go("3 prompts", {"prompt":P(3),"echo":True,"logprobs":1,"max_tokens":0})
go("1 prompt", {"prompt":"hello world","echo":True,"logprobs":1,"max_tokens":1})
go("4 prompts no echo", {"prompt":["a","b","c","d"],"max_tokens":1})
