import http.client, time, threading, sys
def post(path, raw):
    c=http.client.HTTPConnection("localhost",8104,timeout=120); t=time.time()
    c.request("POST",path,body=raw,headers={"Content-Type":"application/json"}); r=c.getresponse(); d=r.read()
    return r.status, len(d), time.time()-t
for n in map(int, sys.argv[1:]):
    body=('{"prompt":"x","max_tokens":1,'+",".join(f'"u{i}":1' for i in range(n))+'}').encode()
    res={}
    th=threading.Thread(target=lambda: res.update(r=post("/v1/tasks/tmp", body))); th.start(); worst=0
    while th.is_alive():
        t=time.time(); c=http.client.HTTPConnection("localhost",8104,timeout=120); c.request("GET","/health"); c.getresponse().read(); worst=max(worst,time.time()-t); time.sleep(0.05)
    s,nb,dt=res["r"]; print(f"fields={n} body={len(body)/1e6:.2f}MB -> {s} reply={nb/1e6:.1f}MB in {dt:.2f}s; worst /health {worst:.2f}s")
