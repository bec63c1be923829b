import httpx, json
U="http://localhost:8791/v1"
c=httpx.Client(timeout=120)
def post(label, body, path="/completions"):
    r=c.post(U+path, json=body); print(f"== {label}: {r.status_code} {r.text[:300]}"); return r
r=post("list of strings n=2", {"model":"x","prompt":["A","B"],"n":2,"max_tokens":3,"seed":5})
if r.status_code==200: print("   idx", [ch["index"] for ch in r.json()["choices"]])
# choose prompt order check: compare with individual requests seeded
a=c.post(U+"/completions", json={"model":"x","prompt":"B","max_tokens":3,"seed":5,"n":2}).json()
print("   B alone n=2:", [ch["text"] for ch in a["choices"]], " vs list idx2,3:", [ch["text"] for ch in r.json()["choices"][2:]])
post("token ids", {"model":"x","prompt":[33,44,55],"max_tokens":3})
post("list of token lists", {"model":"x","prompt":[[33,44],[55]],"max_tokens":3})
post("list with one string (langchain)", {"model":"x","prompt":["Hello"],"max_tokens":3})
r=post("echo", {"model":"x","prompt":"Hello world","max_tokens":3,"echo":True})
r=post("echo token ids", {"model":"x","prompt":[33,44],"max_tokens":3,"echo":True})
r=post("echo stream", {"model":"x","prompt":"Hello world","max_tokens":3,"echo":True,"stream":True})
post("best_of stream", {"model":"x","prompt":"Hi","max_tokens":3,"best_of":2,"stream":True})
post("best_of nonstream", {"model":"x","prompt":"Hi","max_tokens":3,"best_of":2})
post("logprobs 5", {"model":"x","prompt":"Hi","max_tokens":2,"logprobs":5})
post("logprobs 6", {"model":"x","prompt":"Hi","max_tokens":2,"logprobs":6})
post("logprobs 0", {"model":"x","prompt":"Hi","max_tokens":2,"logprobs":0})
post("suffix", {"model":"x","prompt":"def f():","suffix":"\nreturn 1","max_tokens":2})
post("empty prompt", {"model":"x","prompt":"","max_tokens":2})
post("missing prompt", {"model":"x","max_tokens":2})
post("prompt too long", {"model":"x","prompt":"hello "*140000,"max_tokens":2})
post("bad token id", {"model":"x","prompt":[99999999],"max_tokens":2})
post("stop", {"model":"x","prompt":"Hi","max_tokens":5,"stop":["\n"]})
post("unknown fields", {"model":"x","prompt":"Hi","max_tokens":2,"user":{"id":1},"logit_bias":{"33":-100},"foo":"bar","stream_options":None})
# streaming n with list prompt ordering
r=c.post(U+"/completions", json={"model":"x","prompt":["A","B"],"n":2,"max_tokens":3,"seed":5,"stream":True})
evs=[l[6:] for l in r.text.split("\n\n") if l.startswith("data: ")]
from collections import defaultdict
per=defaultdict(str); fins={}
for e in evs[:-1]:
    d=json.loads(e)
    for ch in d["choices"]:
        per[ch["index"]]+=ch["text"]
        if ch["finish_reason"]: fins[ch["index"]]=ch["finish_reason"]
ns=c.post(U+"/completions", json={"model":"x","prompt":["A","B"],"n":2,"max_tokens":3,"seed":5}).json()
print("== stream list n=2 equal nonstream:", all(per[i]==ns["choices"][i]["text"] for i in range(4)), dict(per), fins, evs[-1])
