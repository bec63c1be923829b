import json
L=[json.loads(l) for l in open("/tmp/soak46/qa/monitor.jsonl")]
for s in L:
    if s["t"] in (0,) or s["label"]!="load" or abs(s["t"]-300)<16 or abs(s["t"]-600)<16 or abs(s["t"]-900)<16: print(s["t"],s["label"],s["rss_mb"],s["health"])
print("END", [(s["t"],s["label"],s["rss_mb"],s["health"]["active"],s["health"]["queue"]) for s in L if s["label"]!="load"])
f=[s for s in L if s["label"]=="end_load"][0]
print(json.dumps(f["codes"],indent=0)); print(json.dumps(f["validations"],indent=0))
for k,v in f["lat"].items(): print(f"{k:18s} n={v['n']:5d} p50={v['p50']} p95={v['p95']}")
