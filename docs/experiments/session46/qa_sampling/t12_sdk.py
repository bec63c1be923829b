"""openai SDK: logit_bias (int keys), min_p via extra_body, errors surfaced as BadRequestError with param; Task API odd min_p raw values."""
import sys, json; sys.path.insert(0, "/tmp/qa46/qa")
from common import *
import openai
r = client.completions.create(model="rwkv-7", prompt="Hello", max_tokens=4, logit_bias={40213: 100}, temperature=1.0)
print("sdk comp logit_bias:", repr(r.choices[0].text))
r = client.chat.completions.create(model="rwkv-7", messages=[{"role": "user", "content": "x"}], max_tokens=6, temperature=1.0, extra_body={"min_p": 1, "reasoning_effort": "none"}, presence_penalty=0, frequency_penalty=0)
g = client.chat.completions.create(model="rwkv-7", messages=[{"role": "user", "content": "x"}], max_tokens=6, temperature=0, extra_body={"reasoning_effort": "none"}, presence_penalty=0, frequency_penalty=0)
print("sdk min_p=1 == greedy:", r.choices[0].message.content == g.choices[0].message.content)
for kw in ({"logit_bias": {i: 1 for i in range(301)}}, {"logit_bias": {70000: 1}}, {"extra_body": {"min_p": 2}}, {"response_format": {"type": "bogus"}}):
    try:
        client.chat.completions.create(model="rwkv-7", messages=[{"role": "user", "content": "x"}], max_tokens=2, **kw); print("no error for", kw)
    except openai.BadRequestError as e:
        print("BadRequestError", e.status_code, e.body.get("param") if isinstance(e.body, dict) else e.body, str(e)[:120])
for route in ("/v1/tasks/tmp", "/v1/tasks/create"):
    for v in ("1e400", "1" + "0" * 400, "-0.0", "Infinity", "1e-400"):
        c, j = raw(route, '{"prompt":"hi","max_tokens":2,"min_p":' + v + '}')
        print(f"task {route} min_p={v[:10]}: {c} {json.dumps(j)[:160]}")
