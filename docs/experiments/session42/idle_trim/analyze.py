"""RSS of the two servers of run.sh around the load's end (their mem.jsonl: VmRSS in kB at
wall time ``wall``)."""
import json
import sys

W = sys.argv[1]
start, end = (int(open(f"{W}/load_{k}").read()) for k in ("start", "end"))
for n in ("old", "new"):
    rows = [json.loads(line) for line in open(f"{W}/{n}/mem.jsonl") if '"VmRSS"' in line]

    def at(t):  # the last sample at or before t
        r = [x for x in rows if x["wall"] <= t]
        return (r or rows)[-1]

    parts = [f"{n}:"]
    for label, t in (("load +60 s", start + 60), ("load end", end), ("idle +5 s", end + 5),
                     ("idle +10 s", end + 10), ("idle +20 s", end + 20)):
        x = at(t)
        parts.append(f"{label} {x['VmRSS'] / 1024:.0f} MB (free held {x['fordblks'] >> 20} MB)")
    print("  ".join(parts))
