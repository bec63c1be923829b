import csv, sys
def fit(xs, ys):
    n=len(xs); mx=sum(xs)/n; my=sum(ys)/n
    sxx=sum((x-mx)**2 for x in xs); sxy=sum((x-mx)*(y-my) for x,y in zip(xs,ys))
    b=sxy/sxx; a=my-b*mx
    ss=sum((y-a-b*x)**2 for x,y in zip(xs,ys)); st=sum((y-my)**2 for y in ys)
    return b, (1-ss/st if st else 0)
for name in sys.argv[1:]:
    rows=list(csv.DictReader(open(f"samples_{name}.csv")))
    for r in rows:
        for k in ("t","rss_kb","anon_kb","heap_kb","list_cpu","threads","fds","anon_maps","req_total","req_5xx","probe_s"):
            try: r[k]=float(r[k])
            except: r[k]=None
    cap=300
    full=next((r for r in rows if r["list_cpu"] and r["list_cpu"]>=cap), None)
    print(f"== {name}: {len(rows)} samples, duration {rows[-1]['t']:.0f}s")
    print(f" start   t={rows[0]['t']:.0f}s rss={rows[0]['rss_kb']/1024:.1f} MiB anon={rows[0]['anon_kb']/1024:.1f} heap={rows[0]['heap_kb']/1024:.1f} cpu_tasks={rows[0]['list_cpu']}")
    if full: print(f" LRU full t={full['t']:.0f}s rss={full['rss_kb']/1024:.1f} MiB anon={full['anon_kb']/1024:.1f} heap={full['heap_kb']/1024:.1f} cpu_tasks={full['list_cpu']}")
    else: print(" LRU never reached", cap, "max cpu_tasks", max(r['list_cpu'] or 0 for r in rows))
    e=rows[-1]
    print(f" end     t={e['t']:.0f}s rss={e['rss_kb']/1024:.1f} MiB anon={e['anon_kb']/1024:.1f} heap={e['heap_kb']/1024:.1f} cpu_tasks={e['list_cpu']} threads={e['threads']:.0f} fds={e['fds']:.0f} anon_maps={e['anon_maps']:.0f} req_total={e['req_total']} req_5xx={e['req_5xx']}")
    print(f" max rss={max(r['rss_kb'] for r in rows)/1024:.1f} MiB; threads range {min(r['threads'] for r in rows):.0f}-{max(r['threads'] for r in rows):.0f}; fds range {min(r['fds'] for r in rows):.0f}-{max(r['fds'] for r in rows):.0f}")
    T=e['t']
    for lab,lo in (("last 10 min",T-600),("after LRU full",full['t'] if full else T),("last 5 min",T-300)):
        sel=[r for r in rows if r['t']>=lo]
        if len(sel)<3: continue
        xs=[r['t']/60 for r in sel]
        for k in ("rss_kb","anon_kb","heap_kb"):
            b,r2=fit(xs,[r[k]/1024 for r in sel])
            print(f"  slope {lab:15s} {k:8s}: {b:+6.2f} MiB/min (R2={r2:.2f}, n={len(sel)}, {sel[0][k]/1024:.1f}->{sel[-1][k]/1024:.1f})")
    print(" series (t, rss MiB, anon, heap, cpu_tasks):")
    print("  "+"  ".join(f"{r['t']/60:.1f}m:{r['rss_kb']/1024:.0f}/{r['anon_kb']/1024:.0f}/{r['heap_kb']/1024:.0f}/{r['list_cpu']:.0f}" for r in rows[::3]))
