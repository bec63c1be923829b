import sys
pid=sys.argv[1]; cur=None; out=[]
for line in open(f"/proc/{pid}/smaps"):
    p=line.split()
    if "-" in p[0] and ":" not in p[0]:
        lo,hi=(int(x,16) for x in p[0].split("-")); cur=[p[0], (hi-lo)//1024, p[5] if len(p)>5 else "", 0, p[1]]; out.append(cur)
    elif p[0]=="Rss:": cur[3]=int(p[1])
anon=[m for m in out if m[2]=="" ]
sizes={}
for m in anon:
    b = "64MiB-arena" if m[1] in (65536,) or 60000<m[1]<=65536 else ("<1MiB" if m[1]<1024 else ("1-60MiB" if m[1]<61440 else ">64MiB"))
    s=sizes.setdefault(b,[0,0,0]); s[0]+=1; s[1]+=m[1]; s[2]+=m[3]
heap=sum(m[3] for m in out if m[2]=="[heap]")
print("heap rss MiB", heap/1024)
for b,(n,v,r) in sorted(sizes.items()): print(f"anon {b:12s} n={n:4d} virt={v/1024:8.1f} MiB rss={r/1024:8.1f} MiB")
print("top anon by rss:")
for m in sorted(anon,key=lambda m:-m[3])[:12]: print("  ",m[0],m[4],f"virt={m[1]/1024:.1f}MiB rss={m[3]/1024:.1f}MiB")
