"""HTTP: one /v1/completions request with n=2 and logprobs to a server with a 1 MB cache (8793)
and one without (8794), both RWKV_MAX_BATCH_SIZE=4: the first token's top log probabilities."""
import httpx, json
body = dict(model="rwkv-7", prompt="alpha beta gamma delta river stone cloud apple tiger lamp " * 8,
            max_tokens=2, n=2, temperature=1.0, seed=5, logprobs=3)
for url in ("http://localhost:8793", "http://localhost:8794"):
    r = httpx.post(url + "/v1/completions", json=body, timeout=60).json()
    print(url, [c["logprobs"]["top_logprobs"][0] for c in r["choices"]])
