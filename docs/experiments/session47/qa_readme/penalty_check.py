import httpx
c = httpx.Client(base_url="http://localhost:8101", timeout=60)
for field in ("presence_penalty", "frequency_penalty"):
    for v in (-2, -2.5, -5, 2, 2.5, 10, 15):
        r = c.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, field: v})
        print(field, v, r.status_code, r.text[:140] if r.status_code != 200 else "")
