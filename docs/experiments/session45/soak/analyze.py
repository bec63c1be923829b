"""Summarise samples.jsonl: start/middle/end/idle rows, RSS fits, counters, errors."""
import json, sys
S = [json.loads(l) for l in open(sys.argv[1])]
keys = ("t", "phase", "VmRSS", "RssAnon", "Threads", "fds", "db", "wal", "pc_bytes", "active", "queue",
        "scoring", "finishing", "m_scoring", "unsaved", "list_db", "probe_ms", "health_ms", "sample_err")
load = [s for s in S if s["phase"] == "load"]; idle = [s for s in S if s["phase"] == "idle"]
pick = [load[0], load[len(load)//2], load[-1]] + idle
for s in pick:
    print({k: (round(s[k]/1024) if k in ("VmRSS", "RssAnon") and s.get(k) else s.get(k)) for k in keys})
def fit(rows):
    xs = [r["t"]/60 for r in rows]; ys = [r["VmRSS"]/1024 for r in rows]
    n = len(xs); mx = sum(xs)/n; my = sum(ys)/n
    return sum((x-mx)*(y-my) for x, y in zip(xs, ys)) / sum((x-mx)**2 for x in xs)
for a, b in ((0, 5), (5, 10), (10, 15), (15, 21)):
    rows = [r for r in load if a*60 <= r["t"] < b*60]
    if len(rows) > 2: print(f"RSS slope min {a}-{b}: {fit(rows):+.1f} MiB/min  ({rows[0]['VmRSS']//1024} -> {rows[-1]['VmRSS']//1024} MiB)")
print("RSS MiB series:", [r["VmRSS"]//1024 for r in S])
print("RssAnon-pc MiB:", [round((r["RssAnon"]- r["pc_bytes"]/1024)/1024) for r in S])
print("threads:", [r["Threads"] for r in S]); print("fds:", [r["fds"] for r in S])
print("scoring/queue/active/finishing:", [(r.get("scoring"), r.get("queue"), r.get("active"), r.get("finishing")) for r in S])
print("probe_ms:", [r.get("probe_ms") for r in S])
c = S[-1]["counts"]; print("ops total:", sum(v for k, v in c.items() if not k.startswith("ERR")), "errors:", {k: v for k, v in c.items() if k.startswith("ERR")})
print("counts:", c)
