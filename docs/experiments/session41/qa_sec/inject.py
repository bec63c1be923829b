import http.client, json, sys
H={"Authorization":"Bearer secret","Content-Type":"application/json"}
def req(m,p,body=None,h=H):
    c=http.client.HTTPConnection("localhost",8104,timeout=30)
    c.putrequest(m,p,skip_accept_encoding=True)
    for k,v in h.items(): c.putheader(k,v)
    b=json.dumps(body).encode() if body is not None else b""
    c.putheader("Content-Length",str(len(b))); c.endheaders(b)
    r=c.getresponse(); d=r.read(); c.close(); return r.status,d
ids=["x'%20OR%201=1--","x%22;DROP%20TABLE%20tasks;--","%25","_%25","..%2F..%2Fetc%2Fpasswd","..","%2e%2e",".","x%00y","%00","A"*8000,"A"*70000,"%ED%A0%80","%F0%9F%98%80","x%0AINFO%20forged","x%0D%0AX-Injected:%201","_TMPL_%25","TASK_*","*","_","__","%20","x%09y"]
for tid in ids:
    for ep,m in (("status","GET"),("get_result","GET"),("export_state","GET"),("delete?force=true","POST"),("fork","POST"),("continue","POST"),("stop","POST"),("as_template","POST")):
        try:
            s,d=req(m,f"/v1/tasks/{tid}/{ep}",{} if m=="POST" else None)
        except Exception as e:
            s,d="EXC",repr(e).encode()
        if s not in (404,) or b"Task not found" not in d:
            print(tid[:40],ep,s,d[:150])
print("done ids")
