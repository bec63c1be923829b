import httpx, time, sys
B = sys.argv[1]; n = int(sys.argv[2])
prompt = list(range(1000, 1000 + 60000)) * (n // 60000 + 1)
t = time.time()
r = httpx.post(B + "/v1/completions", json={"prompt": prompt[:n], "max_tokens": 0, "echo": True, "logprobs": 5}, timeout=300)
print(n, r.status_code, f"{time.time()-t:.1f}s", len(r.content) >> 20, "MB", r.text[:150] if r.status_code != 200 else "")
