import json, sys
def load(p):
    S = [json.loads(l) for l in open(p)]
    S = [s for s in S if "pc_bytes" in s and "[anon_small]" in s.get("rss_mb", {})]
    return S
def slope(pts):
    n = len(pts); 
    if n < 2: return float('nan')
    mx = sum(x for x, _ in pts)/n; my = sum(y for _, y in pts)/n
    return sum((x-mx)*(y-my) for x, y in pts)/sum((x-mx)**2 for x, _ in pts)
for p in sys.argv[1:]:
    S = load(p); t0 = S[0]["wall"]
    print(f"== {p}  ({len(S)} samples, {(S[-1]['wall']-t0)/60:.1f} min)")
    print(" win(min)  RSS_end  RSS-pc_end  pc_MB  anon_small  anon_big  heap   slope(RSS-pc) MB/min  slope(anon_small)")
    W = 300
    k = 0
    while True:
        w = [s for s in S if t0 + k*W <= s["wall"] < t0 + (k+1)*W]
        if not w: break
        e = w[-1]; rss = e["VmRSS"]/1024; pc = e["pc_bytes"]/2**20
        sl = slope([((s["wall"]-t0)/60, s["VmRSS"]/1024 - s["pc_bytes"]/2**20) for s in w])
        sa = slope([((s["wall"]-t0)/60, s["rss_mb"]["[anon_small]"]) for s in w])
        r = e["rss_mb"]
        print(f" {k*5:3d}-{k*5+5:<3d}  {rss:7.0f}  {rss-pc:8.0f}  {pc:6.1f}  {r['[anon_small]']:8.0f}  {r.get('[anon_big]',0):7.0f}  {r['[heap]']:5.0f}  {sl:8.1f}  {sa:8.1f}  n={len(w)} maps_small={e['maps_n']['[anon_small]']}")
        k += 1
