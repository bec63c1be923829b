import httpx, json
U="http://localhost:8791/v1"
lb={"261":100,"24281":100}
res={}
for route in ("chat","completions"):
  for i in range(15):
    b={"model":"x","max_tokens":20,"temperature":2.0,"top_p":1,"top_k":2,"seed":i,"logit_bias":lb,"frequency_penalty":1.5}
    if route=="chat":
        r=httpx.post(U+"/chat/completions", json={**b,"messages":[{"role":"user","content":f"Hi {i}"}],"reasoning_effort":"none"}, timeout=60).json()
        ch=r["choices"][0]; t=ch["message"]["content"]
    else:
        r=httpx.post(U+"/completions", json={**b,"prompt":f"Hi {i}"}, timeout=60).json()
        ch=r["choices"][0]; t=ch["text"]
    print(route, i, ch["finish_reason"], r["usage"]["completion_tokens"], repr(t), "CONTAINS" if "\n\nUser" in t else "")
