import httpx, time, json, sys
U="http://127.0.0.1:8791"
reqs = {
 "chat": ("POST","/v1/chat/completions",{"model":"rwkv-7","stream":True,"max_tokens":30000,"messages":[{"role":"user","content":"hi"}]}),
 "completion": ("POST","/v1/completions",{"model":"rwkv-7","stream":True,"max_tokens":30000,"prompt":"hi"}),
 "tmp": ("POST","/v1/tasks/tmp",{"prompt":"hi","max_tokens":30000,"stream":True}),
}
for k,(m,p,b) in reqs.items():
    with httpx.Client(base_url=U, timeout=60) as c:
        with c.stream(m,p,json=b) as r:
            n=0
            for line in r.iter_lines():
                if line.startswith("data:"): n+=1
                if n>=3: break
    t=time.monotonic()
    while True:
        h=httpx.get(U+"/health").json()
        if h["active"]==0 and h["queue"]==0: break
        if time.monotonic()-t>20: break
        time.sleep(0.1)
    print(k, "active", h["active"], "after", round(time.monotonic()-t,2),"s")
