import httpx, json
U="http://localhost:8791/v1"
lb={"261":100,"24281":100,"59":100}
stops=0
for i in range(12):
    for stream in (False,):
        b={"model":"x","messages":[{"role":"user","content":f"Hi {i}"}],"max_tokens":20,"temperature":1.0,"top_p":1,"top_k":3,"seed":i,"logit_bias":lb,"reasoning_effort":"none"}
        r=httpx.post(U+"/chat/completions", json=b, timeout=60).json()["choices"][0]
        t=r["message"]["content"]; 
        if r["finish_reason"]=="stop": stops+=1
        print(i, r["finish_reason"], repr(t), "CONTAINS" if "\n\nUser:" in t else "")
print("stops", stops)
