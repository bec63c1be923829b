from qa import *
import random
wait_idle()
m0 = scrape(); h0 = health()
up = ug = 0; ttft_n = 0; rows = []
# distinct prompts (avoid cache effects on counters other than prompt/gen)
for i in range(4):
    r, dt = chat([{"role": "user", "content": f"Question number {i}: what is {random.random()}?"}], max_tokens=10 + 7 * i)
    u = r.json()["usage"]; up += u["prompt_tokens"]; ug += u["completion_tokens"]; ttft_n += 1
    rows.append(("chat", u, r.json()["choices"][0]["finish_reason"], round(dt, 3)))
for i in range(3):
    body = {"model": "rwkv-7", "prompt": f"Once upon a time {random.random()} there was", "max_tokens": 15 + i}
    r = c.post("/v1/completions", json=body); u = r.json()["usage"]; up += u["prompt_tokens"]; ug += u["completion_tokens"]; ttft_n += 1
    rows.append(("compl", u, r.json()["choices"][0]["finish_reason"]))
for i in range(3):
    s = chat_stream([{"role": "user", "content": f"Stream {i} {random.random()}"}], max_tokens=20)
    up += s["usage"]["prompt_tokens"]; ug += s["usage"]["completion_tokens"]; ttft_n += 1
    rows.append(("stream", s["usage"], s["chunks"]))
for r in rows: print(r)
wait_idle(); time.sleep(0.5)
m1 = scrape(); d = delta(m0, m1)
print(f"usage sums: prompt {up} completion {ug}; requests producing tokens {ttft_n}")
show(d, "tokens"); show(d, "_count")
