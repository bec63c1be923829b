import json, collections, re, sys
OUT = "/tmp/soak52"
s = json.load(open(f"{OUT}/summary.json"))
by = collections.defaultdict(collections.Counter)
for k, n in s["codes"].items():
    ep, code = k.rsplit("|", 1); by[ep][code] += n
tot = 0
print("== requests by endpoint ==")
for ep in sorted(by):
    n = sum(by[ep].values()); tot += n
    l = s["lat"].get(ep, {})
    print(f"{ep:70s} {n:6d}  {dict(sorted(by[ep].items()))}  p50={l.get('p50')} max={l.get('max')}")
print("total", tot)
print("checks", s["checks"])
print("timeouts", s["timeouts"]); print("slow", s["slow"]); print("anomalies", s["anomalies"], "5xx", s["n5xx"])
print("== monitor, every 5 min ==")
mon = [json.loads(l) for l in open(f"{OUT}/monitor.jsonl")]
for m in mon:
    if m["label"] != "load" or m["t"] % 300 < 60 or m is mon[-1]:
        print(f"t={m['t']:5d} {m['label']:10s} rss={m['rss_mb']} MB pc={m['pc_bytes_mb']} MB/{m['pc_entries']} ent evict={m['pc_evictions']} q={m['queue']} act={m['active']} status={m['status']} store_ok={(m['task_store'] or {}).get('ok')} req={m['requests']} 5xx={m['5xx']} to={m['timeouts']} ERR={m['log_ERROR']} TB={m['log_Traceback']} health_s={m['health_s']}")
