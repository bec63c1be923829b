from qa import *
import random
wait_idle(); m0 = scrape()
try:
    httpx.post(BASE + "/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "long"}], "max_tokens": 2000, "reasoning_effort": "none"}, timeout=1.0)
except httpx.ReadTimeout:
    print("client timed out after 1 s (non-stream)")
time.sleep(2); wait_idle(); m1 = scrape(); d = delta(m0, m1)
print({k: v for k, v in d.items() if "requests_total" in k})
print("generated", d.get("rwkv_generated_tokens_total"), "ttft", d.get("rwkv_time_to_first_token_seconds_count"))
# stream duration vs client
wait_idle(); m0 = scrape()
s = chat_stream([{"role": "user", "content": f"dur {random.random()}"}], max_tokens=150)
time.sleep(0.3); m1 = scrape(); d = delta(m0, m1)
print("stream client total %.3f s; duration histogram sum delta %.3f (count %g)" % (s["total"], d.get("rwkv_http_request_duration_seconds_sum{route=/v1/chat/completions}", 0), d.get("rwkv_http_request_duration_seconds_count{route=/v1/chat/completions}", 0)))
