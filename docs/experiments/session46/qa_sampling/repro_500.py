"""Repro: logit_bias with a huge integer value, or a key of > 4300 digits, gives HTTP 500 instead of 400 param logit_bias."""
import httpx
B = "http://127.0.0.1:8791"
for path, base in (("/v1/chat/completions", '"messages":[{"role":"user","content":"hi"}]'), ("/v1/completions", '"prompt":"hi"')):
    for lb in ('{"5": 1' + "0" * 400 + '}', '{"' + "1" * 5000 + '": 1}'):
        body = '{"model":"rwkv-7",' + base + ',"max_tokens":2,"logit_bias":' + lb + '}'
        r = httpx.post(B + path, content=body, headers={"Content-Type": "application/json"})
        print(path, lb[:20], "->", r.status_code, r.text[:160])
