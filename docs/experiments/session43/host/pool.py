import json, sys, glob, statistics
sys.path.insert(0, "/tmp/qa43/host")
from probe import pieces
tag = sys.argv[1]
for tree in ("base", "repo"):
    ps, per_round = [], []
    for f in sorted(glob.glob(f"/tmp/qa43/host/ab_{tag}_{tree}_*.json")):
        recs = json.load(open(f))
        rp = [pieces(r) for i, r in enumerate(recs) if i % 20 >= 2 and i % 2 == 0 and "first" in r and "mp_in" in r]
        ps += rp
        per_round.append(statistics.median(p["cpu step_in->mp_in"] for p in rp))
    print(f"{tree}: {len(ps)} turns")
    for k in ("arr->parsed", "parsed->tokenised", "arr->add_in", "add_task", "add_in->step_in", "step_in->mp_in", "cpu step_in->mp_in", "add_in->mp_in"):
        xs = sorted(p[k] for p in ps)
        print(f"   {k:20s} median {statistics.median(xs):7.1f}  [p25 {xs[len(xs)//4]:7.1f}, p75 {xs[3*len(xs)//4]:7.1f}]")
    print("   per-round medians of cpu step_in->mp_in:", " ".join(f"{x:.0f}" for x in per_round))
