from qa import *
import random, threading, sys
N = int(sys.argv[1]) if len(sys.argv) > 1 else 8
MT = int(sys.argv[2]) if len(sys.argv) > 2 else 300
wait_idle(); m0 = scrape()
print("idle before:", {k: m0[k] for k in ["rwkv_queue_length", "rwkv_capacity", "rwkv_active_slots", "rwkv_max_batch_size"]})
res = []
def worker(i):
    x = httpx.post(BASE + "/v1/tasks/tmp", json={"prompt": f"User: burst {i} {random.random()}\n\nAssistant:", "max_tokens": MT, "stream": False}, timeout=120).json()
    tid = x["task_id"]
    while True:
        j = httpx.get(BASE + f"/v1/tasks/{tid}/get_result", timeout=120).json()
        if j["finished"]: res.append(j); return
        time.sleep(0.5)
ths = [threading.Thread(target=worker, args=(i,)) for i in range(N)]
for t in ths: t.start()
samples = []
while any(t.is_alive() for t in ths):
    m = scrape(); h = health()
    samples.append((m["rwkv_queue_length"], m["rwkv_capacity"], m["rwkv_active_slots"], h["queue"], h["capacity"], h["active"], h["finishing"]))
    time.sleep(0.3)
for t in ths: t.join()
print("samples (metrics q,cap,active | health q,cap,active,finishing):")
for s in samples: print("  ", s)
time.sleep(1); m1 = scrape(); h1 = health()
print("idle after:", {k: m1[k] for k in ["rwkv_queue_length", "rwkv_capacity", "rwkv_active_slots"]}, "health", h1["queue"], h1["capacity"], h1["active"])
d = delta(m0, m1); print("generated", d.get("rwkv_generated_tokens_total"), "expected", N * MT, "ttft count", d.get("rwkv_time_to_first_token_seconds_count"))
