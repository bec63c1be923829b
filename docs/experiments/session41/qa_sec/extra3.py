import httpx, time, threading, http.client, json
gaps=[]
def streamer():
    with httpx.stream("POST","http://localhost:8104/v1/tasks/tmp",json={"prompt":"hi","max_tokens":1500,"stream":True},timeout=120) as r:
        last=time.time()
        for line in r.iter_lines():
            now=time.time(); gaps.append(now-last); last=now
th=threading.Thread(target=streamer); th.start(); time.sleep(2)
body=('{"prompt":"x","max_tokens":1,'+",".join(f'"u{i}":1' for i in range(250000))+'}').encode()
c=http.client.HTTPConnection("localhost",8104,timeout=120); t=time.time(); c.request("POST","/v1/tasks/tmp",body=body,headers={"Content-Type":"application/json"}); r=c.getresponse(); r.read(); print("flood request",r.status,f"{time.time()-t:.1f}s")
th.join(); print("stream events",len(gaps),"max gap between events",f"{max(gaps):.2f}s", "median", f"{sorted(gaps)[len(gaps)//2]:.3f}s")
