import httpx, json, time
U="http://localhost:8791"
def health(): d=httpx.get(U+"/health").json(); return d["active"], d["queue"]
for path, body in [("/v1/chat/completions", {"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":30000,"stream":True}),
                   ("/v1/completions", {"model":"x","prompt":"Hi","max_tokens":30000,"stream":True})]:
    with httpx.stream("POST", U+path, json=body, timeout=60) as r:
        it=r.iter_lines(); [next(it) for _ in range(5)]
        print(path, "during:", health())
    time.sleep(1.5); print(path, "after close:", health())
# Task API stream subscriber disconnect: task keeps running (persisted) - just observe
r=httpx.post(U+"/v1/tasks/tmp", json={"prompt":"Hi","max_tokens":30000,"stream":True}, timeout=5)  if False else None
with httpx.stream("POST", U+"/v1/tasks/tmp", json={"prompt":"Hi","max_tokens":3000,"stream":True}, timeout=60) as r:
    it=r.iter_lines(); first=next(it); print("task stream first", first[:80])
time.sleep(1.5); print("task tmp stream after close:", health())
# keep-alive: long prefill while another long prefill queued? try big prompt stream and look for comment lines
with httpx.stream("POST", U+"/v1/chat/completions", json={"model":"x","messages":[{"role":"user","content":"word "*60000}],"max_tokens":2,"stream":True}, timeout=300) as r:
    t0=time.time(); lines=[]
    for l in r.iter_lines():
        lines.append((round(time.time()-t0,1), l[:60]))
    print("long prefill stream lines:", [x for x in lines if x[1]][:6])
