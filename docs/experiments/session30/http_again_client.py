"""The client of http_again.py: URL N -> JSON of the TTFT median and quartiles (ms) of N
streamed chat requests of one 10-turn history, after 5 unmeasured ones."""
import json
import statistics
import sys
import time

import httpx

url, n = sys.argv[1], int(sys.argv[2])
details = "Here are more details about the situation, with numbers, names and places. "
msgs = [{"role": "system", "content": "You are a helpful assistant. " * 20}]
for i in range(9):
    msgs.append({"role": "user", "content": f"Question {i}: " + details * 8})
    msgs.append({"role": "assistant", "content": "I see. " * 10})
msgs.append({"role": "user", "content": "What do you conclude?"})
body = {"model": "rwkv-7", "messages": msgs, "max_tokens": 2, "stream": True, "temperature": 0,
        "reasoning_effort": "none"}
out = []
with httpx.Client(timeout=60) as c:
    for i in range(n + 5):
        t0, first = time.perf_counter(), None
        with c.stream("POST", url + "/v1/chat/completions", json=body) as r:
            for line in r.iter_lines():
                if first is None and '"content":"' in line and '"content":""' not in line:
                    first = time.perf_counter()
        if i >= 5:
            out.append((first - t0) * 1e3)
out.sort()
print(json.dumps({"median": statistics.median(out), "q1": out[len(out) // 4],
                  "q3": out[3 * len(out) // 4]}))
