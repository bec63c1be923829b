import httpx, collections
import sys,json
PROMPTS=json.loads(sys.argv[1])
U="http://localhost:8791/v1/completions"
c=httpx.Client(timeout=60)
cnt=collections.Counter(); msgs=set()
for i in range(300):
    r=c.post(U,json={"prompt":PROMPTS,"echo":True,"logprobs":0,"max_tokens":0})
    cnt[r.status_code]+=1
    if r.status_code!=200: msgs.add(r.text[:200])
print(cnt, msgs)
