import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
CH="/v1/chat/completions"
msgs=[{"role":"user","content":"Hi"}]
st,h,b=sse(CH,"POST",{"model":"rwkv-7","messages":msgs,"max_tokens":12,"stream":True})
objs=[json.loads(e[6:]) for e in b.split("\n\n") if e.startswith("data: {")]
for o in objs: print(json.dumps(o["choices"], ensure_ascii=False)[:200], "usage" in o)
# streamed tool call forced
tools=[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":False}}}]
for strict in [False]:
    st,h,b=sse(CH,"POST",{"model":"rwkv-7","messages":[{"role":"user","content":"weather?"}],"tools":tools,"tool_choice":"required","max_tokens":80,"stream":True})
    objs=[json.loads(e[6:]) for e in b.split("\n\n") if e.startswith("data: {")]
    print("== tool stream", st)
    for o in objs: print(json.dumps(o["choices"], ensure_ascii=False)[:300])
    print(b[-30:].replace("\n","\\n"))
r=c.post(CH,json={"model":"rwkv-7","messages":[{"role":"user","content":"weather?"}],"tools":tools,"tool_choice":"required","max_tokens":80})
print("== tool nonstream", r.status_code, r.text[:600])
# HEAD
for p in ["/v1/models","/health","/v1/tasks/list"]:
    r=c.head(p); print("HEAD",p,r.status_code, len(r.content))
# Accept-Encoding gzip on stream
with c.stream("POST",CH,json={"model":"rwkv-7","messages":msgs,"max_tokens":3,"stream":True},headers={"accept-encoding":"gzip, br"}) as r:
    print("stream content-encoding:", r.headers.get("content-encoding"), "ct", r.headers.get("content-type"))
    r.read()
r=c.post(CH,json={"model":"rwkv-7","messages":msgs,"max_tokens":200},headers={"accept-encoding":"gzip"}); print("nonstream content-encoding:", r.headers.get("content-encoding"))
# CORS
hdrs={"Origin":"https://chat.example.com","Access-Control-Request-Method":"POST","Access-Control-Request-Headers":"authorization,content-type,x-stainless-os,x-stainless-lang","Access-Control-Request-Private-Network":"true"}
for p in ["/v1/chat/completions","/v1/models","/v1/tasks/create","/v1/tasks/TASK_x/stream","/nonexistent"]:
    r=c.options(p,headers=hdrs); print("OPTIONS",p,r.status_code,{k:v for k,v in r.headers.items() if k.startswith("access-control")})
r=c.post(CH,json={"model":"rwkv-7","messages":[]},headers={"Origin":"https://chat.example.com"}); print("error CORS:", r.status_code, {k:v for k,v in r.headers.items() if k.startswith("access-control")})
r=c.get("/v1/tasks/TASK_x/status",headers={"Origin":"https://chat.example.com"}); print("404 CORS:", r.status_code, {k:v for k,v in r.headers.items() if k.startswith("access-control")})
# keys with no server key
for a in ["Bearer sk-anything","Bearer ","Basic xyz","garbage"]:
    r=c.post(CH,json={"model":"rwkv-7","messages":msgs,"max_tokens":1},headers={"Authorization":a}); print("auth",repr(a),r.status_code)
# unknown route, OpenAI 404 shape?
for p in ["/v1/embeddings","/v1/chat/completion","/v1/nothing"]:
    r=c.post(p,json={}); print("404?",p,r.status_code,r.text[:200])
