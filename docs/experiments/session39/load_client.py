"""N chat requests against URL from 4 threads (distinct prompts, 16 tokens each): gc_load.sh."""
import random
import sys
import threading

import httpx

url, n = sys.argv[1], int(sys.argv[2])
WORDS = ["alpha", "beta", "gamma", "delta", "tree", "sky"]


def worker(k):
    with httpx.Client(timeout=120) as c:
        for i in range(k, n, 4):
            words = " ".join(random.choice(WORDS) for _ in range(200))
            r = c.post(url + "/v1/chat/completions", json={
                "model": "rwkv-7", "max_tokens": 16,
                "messages": [{"role": "system", "content": "You are kind."},
                             {"role": "user", "content": f"{i} {words}"}]})
            assert r.status_code == 200, r.text


ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print("done", n)
