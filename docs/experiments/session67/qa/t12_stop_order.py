import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
CO="/v1/completions"; CH="/v1/chat/completions"
# force 'x' (121) and 'Z'(91) tokens; stop at "Z"
lb={"121":50,"91":50}
r=c.post(CO,json={"model":"rwkv-7","prompt":"Hi","max_tokens":30,"seed":3,"logit_bias":lb,"stop":"Z","top_k":0,"top_p":1,"presence_penalty":0}).json()
print("stop Z:", repr(r["choices"][0]["text"]), r["choices"][0]["finish_reason"], r["usage"])
st,h,b=sse(CO,"POST",{"model":"rwkv-7","prompt":"Hi","max_tokens":30,"seed":3,"logit_bias":lb,"stop":["Z"],"top_k":0,"top_p":1,"presence_penalty":0,"stream":True})
objs=[json.loads(e[6:]) for e in b.split("\n\n") if e.startswith("data: {")]
print("stream stop Z:", repr("".join(o["choices"][0]["text"] for o in objs if o["choices"])), [o["choices"][0]["finish_reason"] for o in objs if o["choices"]][-1])
# chat stop with reasoning none
r=c.post(CH,json={"model":"rwkv-7","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"none","max_tokens":30,"seed":3,"logit_bias":lb,"stop":"Z","top_k":0,"top_p":1,"presence_penalty":0}).json()
print("chat stop Z:", repr(r["choices"][0]["message"]["content"]), r["choices"][0]["finish_reason"])
# new turn "\n\nUser" stop: force 261 then 24281
lb2={"261":60,"24281":60}
r=c.post(CO,json={"model":"rwkv-7","prompt":"Hi","max_tokens":30,"seed":3,"logit_bias":lb2,"top_k":0,"top_p":1,"presence_penalty":0}).json()
print("completions \\n\\nUser:", repr(r["choices"][0]["text"]), r["choices"][0]["finish_reason"])
r=c.post(CH,json={"model":"rwkv-7","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"none","max_tokens":30,"seed":3,"logit_bias":lb2,"top_k":0,"top_p":1,"presence_penalty":0}).json()
print("chat \\n\\nUser:", repr(r["choices"][0]["message"]["content"]), r["choices"][0]["finish_reason"])
# EOS (token 0) forced
r=c.post(CO,json={"model":"rwkv-7","prompt":"Hi","max_tokens":30,"logit_bias":{"0":100}}).json()
print("eos:", repr(r["choices"][0]["text"]), r["choices"][0]["finish_reason"], r["usage"])
st,h,b=sse(CH,"POST",{"model":"rwkv-7","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"none","max_tokens":30,"logit_bias":{"0":100},"stream":True})
print("chat eos stream:", [e[:200] for e in b.split("\n\n") if e])
# Task API with eos forced
r=c.post("/v1/tasks/create",json={"prompt":"Hi","max_tokens":30,"logit_bias":{"0":100}}); tid=r.json()["task_id"]; print("task eos:", wait_done(tid).text)
# completions ordering with n and echo
r=c.post(CO,json={"model":"rwkv-7","prompt":["AAA","BBB"],"n":2,"echo":True,"max_tokens":2}).json()
print("order:", [(ch["index"], ch["text"][:5]) for ch in r["choices"]])
st,h,b=sse(CO,"POST",{"model":"rwkv-7","prompt":["AAA","BBB"],"n":2,"max_tokens":3,"stream":True,"echo":True})
objs=[json.loads(e[6:]) for e in b.split("\n\n") if e.startswith("data: {")]
acc={}
for o in objs:
    for ch in o["choices"]: acc[ch["index"]]=acc.get(ch["index"],"")+ch["text"]
print("stream order:", {k:v[:5] for k,v in sorted(acc.items())}, "fin:", [(ch["index"],ch["finish_reason"]) for o in objs for ch in o["choices"] if ch["finish_reason"]])
