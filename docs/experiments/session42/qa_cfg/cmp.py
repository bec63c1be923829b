import json,sys
a=json.load(open(sys.argv[1]));b=json.load(open(sys.argv[2]))
skip=set(sys.argv[3:])|{"health_after"}
n=0
for k in sorted(set(a)|set(b)):
    if k in skip: continue
    if a.get(k)!=b.get(k): n+=1; print("  DIFF",k,"\n    base:",json.dumps(a.get(k),ensure_ascii=False)[:300],"\n    this:",json.dumps(b.get(k),ensure_ascii=False)[:300])
print(f"  {n} keys differ from {sys.argv[1]}")
