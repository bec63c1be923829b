"""A 3-turn chat naming a template, against a running server: each turn's prompt tokens, the
tokens its prefill computed (/health's prefix_cache.prefilled_tokens), hits and warm-up tokens.

    RWKV_TASK_DB_PATH=/tmp/smoke.db uv run python run.py --demo tiny --port 8312 &
    uv run python docs/experiments/session37/template_chat_smoke.py http://localhost:8312
"""
import sys
import time

import httpx

c = httpx.Client(base_url=sys.argv[1], timeout=60)
system = "System: You are a terse pirate who answers every question in few words.\n\n"
t = c.post("/v1/tasks/create", json={"prompt": system, "max_tokens": 0}).json()["task_id"]
time.sleep(0.5)  # (its prefill done)
tpl = c.post(f"/v1/tasks/{t}/as_template").json()["task_id"]
msgs = []
for turn in range(3):
    msgs.append({"role": "user", "content": f"Turn {turn}: "
                 + "tell me about the treasure and the map and the island, " * 12})
    before = c.get("/health").json()["prefix_cache"]
    r = c.post("/v1/chat/completions", json={"model": f"rwkv-7:{tpl}", "messages": msgs,
                                             "max_tokens": 8, "temperature": 0,
                                             "reasoning_effort": "none"}).json()
    after = c.get("/health").json()["prefix_cache"]
    print(f"turn {turn}: prompt_tokens {r['usage']['prompt_tokens']}, prefilled "
          f"{after['prefilled_tokens'] - before['prefilled_tokens']}, hits {after['hits']}, "
          f"warm_tokens {after['warm_tokens']}")
    msgs.append({"role": "assistant", "content": r["choices"][0]["message"]["content"]})
    time.sleep(0.5)  # (the next-turn warm-up runs 50 ms after a reply)
