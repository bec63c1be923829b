from qa import *
import random, threading
def buckets(m, name):
    return {k: v for k, v in m.items() if k.startswith(name + "_bucket")}
wait_idle(); m0 = scrape()
client_ttft = []; est_tpot = []; ntasks = 0; pulses = 0; ramp_est = 0
for i in range(4):
    p = f"User: timing {random.random()}\n\nAssistant:"
    t0 = time.perf_counter(); prev = None; first = None
    with c.stream("POST", "/v1/tasks/tmp", json={"prompt": p, "max_tokens": 100, "stream": True}) as r:
        for line in r.iter_lines():
            if not line.startswith("data: {"): continue
            j = json.loads(line[6:])
            if "data" not in j: continue
            if first is None: first = time.perf_counter() - t0
            est_tpot.append(1 / j["speed"]); pulses += 1
    client_ttft.append(first); ntasks += 1
wait_idle(); m1 = scrape(); d = delta(m0, m1)
print("client TTFT per request:", [round(x, 4) for x in client_ttft], "sum", round(sum(client_ttft), 4))
print("metric TTFT count", d.get("rwkv_time_to_first_token_seconds_count"), "sum", round(d.get("rwkv_time_to_first_token_seconds_sum", 0), 4))
print("events with data (pulses seen by client)", pulses, "; per-pulse s/token estimates sum", round(sum(est_tpot), 4))
print("metric TPOT count", d.get("rwkv_time_per_output_token_seconds_count"), "sum", round(d.get("rwkv_time_per_output_token_seconds_sum", 0), 4))
print("expected TPOT count from ramp 1,2,4,8,16,32,32,5 = 8 pulses x 4 =", 32)
print("generated", d.get("rwkv_generated_tokens_total"))
print("ttft bucket deltas", {k.split('le=')[1]: v for k, v in d.items() if 'time_to_first_token_seconds_bucket' in k})
print("tpot bucket deltas", {k.split('le=')[1]: v for k, v in d.items() if 'time_per_output_token_seconds_bucket' in k})
