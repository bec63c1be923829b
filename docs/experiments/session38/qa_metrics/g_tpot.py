from qa import *
import random
for trial in range(3):
    wait_idle(); m0 = scrape()
    r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": f"one token {random.random()}", "max_tokens": 1})
    wait_idle(); m1 = scrape(); d = delta(m0, m1)
    print("max_tokens=1: usage", r.json()["usage"], "| tpot count +%g sum +%.5f | ttft count +%g sum +%.5f | generated +%g" % (
        d.get("rwkv_time_per_output_token_seconds_count", 0), d.get("rwkv_time_per_output_token_seconds_sum", 0),
        d.get("rwkv_time_to_first_token_seconds_count", 0), d.get("rwkv_time_to_first_token_seconds_sum", 0), d.get("rwkv_generated_tokens_total", 0)))
# reference: a 2-token reply, and a 33-token reply (first pulse + decode pulses)
for mt in (2, 33):
    wait_idle(); m0 = scrape()
    r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": f"ref {random.random()}", "max_tokens": mt})
    wait_idle(); m1 = scrape(); d = delta(m0, m1)
    print(f"max_tokens={mt}: tpot count +%g sum +%.5f mean %.5f" % (d.get("rwkv_time_per_output_token_seconds_count", 0), d.get("rwkv_time_per_output_token_seconds_sum", 0),
          d.get("rwkv_time_per_output_token_seconds_sum", 0) / d.get("rwkv_time_per_output_token_seconds_count", 1)),
          "buckets:", {k.split('le=')[1][:-1]: v for k, v in d.items() if 'time_per_output_token_seconds_bucket' in k and v < d.get("rwkv_time_per_output_token_seconds_count")})
