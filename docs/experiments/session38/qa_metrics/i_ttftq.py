from qa import *
import random, threading
wait_idle(); m0 = scrape(); out = []
def w(i):
    s = chat_stream([{"role": "user", "content": f"q {i} {random.random()}"}], max_tokens=120)
    out.append(s)
ths = [threading.Thread(target=w, args=(i,)) for i in range(4)]
t0 = time.perf_counter()
for t in ths: t.start()
for t in ths: t.join()
wait_idle(); m1 = scrape(); d = delta(m0, m1)
cl = sorted(round(s["ttft"], 3) for s in out)
print("client TTFTs", cl, "sum", round(sum(cl), 3))
print("metric TTFT count", d.get("rwkv_time_to_first_token_seconds_count"), "sum", round(d.get("rwkv_time_to_first_token_seconds_sum"), 3))
print("buckets", {k.split('le=')[1][:-1]: v for k, v in d.items() if 'time_to_first_token_seconds_bucket' in k})
print("usage", [s["usage"] for s in out]); print("generated", d.get("rwkv_generated_tokens_total"), "prompt", d.get("rwkv_prompt_tokens_total"), "usage sums", sum(s["usage"]["prompt_tokens"] for s in out), sum(s["usage"]["completion_tokens"] for s in out))
