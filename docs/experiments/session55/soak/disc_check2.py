import httpx, time
U="http://127.0.0.1:8791"
for p,b in (("/v1/chat/completions",{"model":"rwkv-7","max_tokens":30000,"messages":[{"role":"user","content":"hi"}]}),
            ("/v1/completions",{"model":"rwkv-7","max_tokens":30000,"prompt":"hi","n":2})):
    try:
        httpx.post(U+p,json=b,timeout=1.0)
    except httpx.TimeoutException: pass
    t=time.monotonic()
    while True:
        h=httpx.get(U+"/health").json()
        if h["active"]==0 and h["queue"]==0: break
        if time.monotonic()-t>20: break
        time.sleep(0.1)
    print(p, "active", h["active"], "after", round(time.monotonic()-t,2),"s")
