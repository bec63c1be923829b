import http.client, json, struct, time, os, sys
H={"Authorization":"Bearer secret"}
SPID=int(sys.argv[1])
def rss(): return int([l for l in open(f"/proc/{SPID}/status") if l.startswith("VmRSS")][0].split()[1])//1024
def req(m,p,body=None,ct="application/json"):
    c=http.client.HTTPConnection("localhost",8104,timeout=120)
    c.request(m,p,body=body,headers={**H,"Content-Type":ct}); r=c.getresponse(); d=r.read(); return r.status,d
good=open("st.safetensors","rb").read()
hl=struct.unpack("<Q",good[:8])[0]; hdr=json.loads(good[8:8+hl]); data=good[8+hl:]
N=int(sys.argv[2])
hdr["__metadata__"]["history"]="["+",".join(["1"]*N)+"]"
h=json.dumps(hdr).encode(); body=struct.pack("<Q",len(h))+h+data
print("body MB",len(body)/1e6, "rss before",rss())
t=time.time(); s,d=req("POST","/v1/tasks/import_state?name=hb%d"%N,body,"application/octet-stream"); print("import",s,d[:200],f"{time.time()-t:.1f}s","rss",rss())
for i in range(int(sys.argv[3])):
    t=time.time(); s,d=req("POST",f"/v1/tasks/_hb{N}/fork?tmp=true",json.dumps({"prompt":"x","max_tokens":1}).encode())
    if i%5==0 or s!=200: print("fork",i,s,d[:100],f"{time.time()-t:.2f}s","rss",rss())
time.sleep(3); print("rss end",rss())
