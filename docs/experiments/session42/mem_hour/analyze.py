"""Analyse the session-42 hour-long soak (run.sh, collect.py): per server (A as served, B with
malloc_trim(0) every 60 s) RSS, glibc in-use (uordblks + hblkhd) and free-held (fordblks) at
minutes 5..60 of the load, slopes (least squares, MB/min) over minutes 10-30 and 30-60, B's
trims, and soak.py's request latencies side by side.
usage: uv run python analyze.py [DIR=this folder]   (reads DIR/{a,b}/mem.jsonl, samples.jsonl,
DIR/load_start)"""
import json, os, statistics as st, sys

D = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
T0 = float(open(f"{D}/load_start").read())
T1 = float(open(f"{D}/load_end").read()) if os.path.exists(f"{D}/load_end") else None  # soak.py's exit: load + IDLE_S (60 s) idle
LOAD_S = float(os.environ.get("LOAD_S", "3600"))  # run.sh's DURATION_S: the load ends at T0 + LOAD_S
MB = 1 / 2**20
MINS = (5, 10, 20, 30, 40, 50, 60)


def load(n):
    mem, trims = [], []
    for l in open(f"{D}/{n}/mem.jsonl"):
        r = json.loads(l)
        r["min"] = (r["wall"] - T0) / 60
        (trims if r.get("trim") else mem).append(r)
    soak = [json.loads(l) for l in open(f"{D}/{n}/samples.jsonl")]
    for r in soak:
        r["min"] = r["t"] / 60
    return mem, trims, soak


def near(rows, m, key=None):
    c = [r for r in rows if key is None or r.get(key) is not None]
    return min(c, key=lambda r: abs(r["min"] - m))


def fields(r, s):
    rss = r["VmRSS"] / 1024
    pc = (s.get("pc_bytes") or 0) * MB
    return {"rss": rss, "rss_nocache": rss - pc, "inuse": (r["uordblks"] + r["hblkhd"]) * MB,
            "free": r["fordblks"] * MB, "arena": r["arena"] * MB, "hblkhd": r["hblkhd"] * MB,
            "thr": r["Threads"]}


def slope(xs, ys):
    mx, my = st.mean(xs), st.mean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def series(mem, soak, lo, hi, key):
    pts = [(r["min"], fields(r, near(soak, r["min"], "pc_bytes"))[key]) for r in mem if lo <= r["min"] <= hi]
    return slope(*zip(*pts)) if len(pts) > 2 else float("nan")


def pct(v, q):
    v = sorted(v); return v[min(len(v) - 1, int(q * len(v)))]


data = {n: load(n) for n in ("a", "b")}
print(f"load start {T0:.0f}, load end {T0 + LOAD_S:.0f}" + (f", soak.py exit {T1:.0f} ({(T1 - T0) / 60:.1f} min, after its 60 s idle)" if T1 else ""))
for n, (mem, trims, soak) in data.items():
    name = {"a": "A (as served)", "b": "B (malloc_trim(0) every 60 s)"}[n]
    print(f"\n== {name}: {len(mem)} probe samples, {len(trims)} trims")
    print(f"{'min':>4} {'RSS':>7} {'RSS-pc':>7} {'in-use':>7} {'free':>7} {'arena':>7} {'mmap':>6} {'thr':>4}   (MB; in-use = uordblks+hblkhd, free = fordblks, pc = prefix cache bytes)")
    for m in (0,) + MINS:
        r = near(mem, m)
        if abs(r["min"] - m) > 0.5: print(f"{m:>4} (no sample)"); continue
        f = fields(r, near(soak, m, "pc_bytes"))
        print(f"{m:>4} {f['rss']:7.0f} {f['rss_nocache']:7.0f} {f['inuse']:7.0f} {f['free']:7.0f} {f['arena']:7.0f} {f['hblkhd']:6.0f} {f['thr']:4d}")
    post = [r for r in mem if r["wall"] > T0 + LOAD_S]
    if post:
        f = fields(post[-1], soak[-1]); print(f"idle {f['rss']:7.0f} {f['rss_nocache']:7.0f} {f['inuse']:7.0f} {f['free']:7.0f} {f['arena']:7.0f} {f['hblkhd']:6.0f} {f['thr']:4d}   (last sample, {(post[-1]['wall'] - T0 - LOAD_S):.0f} s after load end)")
    print("RSS median per 5 min (MB): " + " ".join(f"{st.median([r['VmRSS'] / 1024 for r in mem if a <= r['min'] < a + 5]):.0f}" for a in range(0, 60, 5)))
    for lo, hi in ((10, 30), (30, 60), (10, 60)):
        print(f"slope min {lo}-{hi}: " + ", ".join(f"{k} {series(mem, soak, lo, hi, k):+.2f}" for k in ("rss", "rss_nocache", "inuse", "free", "arena")) + " MB/min")
    if trims:
        ms = [t["ms"] for t in trims]
        ret = [(t["rss_before"] - t["rss_after"]) / 1024 for t in trims]
        ld = [t for t in trims if t["wall"] <= T0 + LOAD_S]
        print(f"trims: {len(trims)} ({len(ld)} under load); duration ms median {st.median(ms):.2f}, p90 {pct(ms, 0.9):.2f}, max {max(ms):.2f}; "
              f"MB returned median {st.median(ret):.1f}, p90 {pct(ret, 0.9):.1f}, max {max(ret):.1f}, total {sum(ret):.0f}")
        print("  first trims (min, ms, RSS before->after MB): " + "; ".join(f"{t['min']:.1f} {t['ms']:.1f} {t['rss_before']/1024:.0f}->{t['rss_after']/1024:.0f}" for t in trims[:3]))
        print("  RSS before -> after a trim, median per 10 min (MB): " + "; ".join(
            f"{a}-{a + 10}: {st.median([t['rss_before'] / 1024 for t in trims if a <= t['min'] < a + 10]):.0f} -> {st.median([t['rss_after'] / 1024 for t in trims if a <= t['min'] < a + 10]):.0f}"
            for a in range(0, 60, 10)))
        big = sorted(trims, key=lambda t: -t["ms"])[:5]
        print("  longest: " + "; ".join(f"min {t['min']:.1f} {t['ms']:.1f} ms ({(t['rss_before']-t['rss_after'])/1024:.0f} MB)" for t in big))

print("\n== soak.py request latencies under load (ms): median of the per-30-s p50s / max of the per-30-s maxes; probe = fixed 16-token greedy completion every 30 s")
ops = sorted({k[4:] for n in data for r in data[n][2] for k in r if k.startswith("p50_")})
print(f"{'op':>18} {'A p50':>7} {'B p50':>7} {'A max':>7} {'B max':>7}")
for op in ops:
    row = []
    for stat, agg in (("p50_", st.median), ("max_", max)):
        for n in ("a", "b"):
            v = [r[stat + op] for r in data[n][2] if r.get("phase") == "load" and stat + op in r]
            row.append(f"{agg(v):7.0f}" if v else f"{'-':>7}")
    print(f"{op:>18} {row[0]} {row[1]} {row[2]} {row[3]}")
for n in ("a", "b"):
    p = [r["probe_ms"] for r in data[n][2] if r.get("phase") == "load" and r.get("probe_ms")]
    print(f"probe {n.upper()}: n {len(p)}, median {st.median(p):.0f}, p90 {pct(p, 0.9):.0f}, max {max(p):.0f} ms")
for n in ("a", "b"):
    c = [r["counts"] for r in data[n][2] if r.get("phase") == "load" and r.get("counts")]
    c = c[-1] if c else {}
    errs = sum(v for k, v in c.items() if k.startswith("ERR"))
    done = sum(v for k, v in c.items() if not k.startswith("ERR") and not k.endswith("_cut"))
    print(f"ops {n.upper()}: {done} completed, {errs} errors; " + ", ".join(f"{k} {c[k]}" for k in ("chat", "chat_stream", "completion", "create", "tmp", "stop") if k in c))
if "b" in data and data["b"][1]:
    # intervals of B's soak sampler (30 s) holding a trim vs not: the max latency of any op
    mem, trims, soak = data["b"]
    ld = [r for r in soak if r.get("phase") == "load"]
    w, wo = [], []
    for prev, r in zip(ld, ld[1:]):
        mx = max([v for k, v in r.items() if k.startswith("max_")] or [0])
        has = any(prev["min"] <= t["min"] < r["min"] for t in trims)
        (w if has else wo).append(mx)
    if w and wo:
        print(f"B, worst op latency per 30-s interval: intervals with a trim n {len(w)} median {st.median(w):.0f} ms, without n {len(wo)} median {st.median(wo):.0f} ms")
