import httpx, json, random
U="http://localhost:8791/v1/completions"
c=httpx.Client(timeout=600)
random.seed(3)
PS=[["Hello there", "中文 😀 ok "*80, "", "x y z"], [[random.randrange(1,65000) for _ in range(700)], [], [5,6], [7]]]
for prompts in PS:
 for mt in (0,1):
     body={"prompt":prompts,"echo":True,"logprobs":2,"max_tokens":mt,"n":2,"temperature":0,"stream":True}
     ev=[]
     with c.stream("POST",U,json=body) as r:
         print("status",r.status_code)
         for line in r.iter_lines():
             if line.startswith("data: "):
                 d=line[6:]
                 if d=="[DONE]": ev.append("DONE"); continue
                 ev.append(json.loads(d))
     agg={}
     for e in ev:
         if e=="DONE": continue
         for ch in e["choices"]:
             a=agg.setdefault(ch["index"],{"text":"","tokens":[],"tlp":[],"off":[],"fin":None})
             a["text"]+=ch["text"]
             if ch.get("logprobs"):
                 a["tokens"]+=ch["logprobs"]["tokens"]; a["tlp"]+=ch["logprobs"]["token_logprobs"]; a["off"]+=ch["logprobs"]["text_offset"]
             if ch.get("finish_reason"): a["fin"]=ch["finish_reason"]
     nons=c.post(U,json={**body,"stream":False}).json()["choices"]
     print("mt",mt,"events",len(ev),"last",ev[-1],"indexes",sorted(agg))
     for ch in nons:
         a=agg[ch["index"]]
         same=(a["text"]==ch["text"], a["tokens"]==ch["logprobs"]["tokens"], a["tlp"]==ch["logprobs"]["token_logprobs"], a["off"]==ch["logprobs"]["text_offset"], a["fin"]==ch["finish_reason"])
         if not all(same): print("idx",ch["index"],"stream vs nonstream",same, a["off"][:6], ch["logprobs"]["text_offset"][:6], a["fin"], ch["finish_reason"])
print("ok")
