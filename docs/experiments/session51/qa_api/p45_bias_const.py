import httpx
B="http://localhost:8791/v1/completions"
c=httpx.Client(timeout=60)
rf={"type":"json_schema","json_schema":{"name":"s","schema":{"type":"string","const":"中文中文"}}}
for lb in [{}, {"10285":-100}, {"229":100}, {"10285":-100,"229":100}]:
    r=c.post(B, json=dict(model="m", prompt="x", max_tokens=12, response_format=rf, logit_bias=lb, logprobs=0, seed=1)).json()["choices"][0]
    print(lb, repr(r["text"]), r["logprobs"]["tokens"])
# same bias without grammar: does +100 on byte token 229 (\xe4) get drawn?
r=c.post(B, json=dict(model="m", prompt="x", max_tokens=3, logit_bias={"229":100}, logprobs=0, seed=1)).json()["choices"][0]
print("no grammar, +100 on 229:", r["logprobs"]["tokens"])
