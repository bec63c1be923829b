"""Copy the small results of run.sh from /tmp/mem42 into this folder (a/, b/):
mem.jsonl (whole: the probe's 15 s samples and B's trims), soak.log (soak.py's stdout: one
summary line per 30 s and LOAD DONE with the op counts), errors.log, info.txt, and
samples.jsonl trimmed to t, phase, VmRSS, pc_bytes, probe_ms and the per-interval op
latencies (p50_*, max_*), the op counts kept on the last load line only.
usage: uv run python collect.py [SRC=/tmp/mem42]"""
import json, os, shutil, sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "/tmp/mem42"
HERE = os.path.dirname(os.path.abspath(__file__))
for f in ("load_start", "load_end"):
    if os.path.exists(f"{SRC}/{f}"):
        shutil.copy(f"{SRC}/{f}", f"{HERE}/{f}")
for n in ("a", "b"):
    d = f"{HERE}/{n}"; os.makedirs(d, exist_ok=True)
    for f in ("mem.jsonl", "soak.log", "info.txt", "soak/errors.log"):
        if os.path.exists(f"{SRC}/{n}/{f}"):
            shutil.copy(f"{SRC}/{n}/{f}", f"{d}/{os.path.basename(f)}")
    rows = [json.loads(l) for l in open(f"{SRC}/{n}/soak/samples.jsonl")]
    last_load = max(i for i, r in enumerate(rows) if r.get("phase") == "load")
    with open(f"{d}/samples.jsonl", "w") as out:
        for i, r in enumerate(rows):
            k = {x: r[x] for x in ("t", "phase", "VmRSS", "pc_bytes", "probe_ms") if x in r}
            k.update({x: v for x, v in r.items() if x.startswith(("p50_", "max_"))})
            if i == last_load or i == len(rows) - 1:
                k["counts"] = r.get("counts")
            out.write(json.dumps(k) + "\n")
for root, _, files in os.walk(HERE):
    for f in files:
        p = os.path.join(root, f)
        if os.path.getsize(p) > 200_000:
            print("WARNING over 200 KB:", p, os.path.getsize(p))
