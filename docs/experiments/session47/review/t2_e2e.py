import json
from server_common import live, httpx
with live() as srv:
    c = httpx.Client(base_url=srv.url, timeout=120)
    msgs = [{"role": "user", "content": "hi"}]
    r = c.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 40, "seed": 1,
        "response_format": {"type": "json_object"}, "logprobs": True, "top_logprobs": 2})
    b = r.json(); print(r.status_code, repr(b["choices"][0]["message"]), b["choices"][0]["finish_reason"], b["usage"])
    lp = b["choices"][0]["logprobs"]["content"]
    print("n logprobs", len(lp), "tokens:", "".join(e["token"] for e in lp)[:200])
    # stream same
    with c.stream("POST", "/v1/chat/completions", json={"messages": msgs, "max_tokens": 40, "seed": 1,
        "response_format": {"type": "json_object"}, "logprobs": True, "stream": True}) as r:
        text = ""; n=0
        for line in r.iter_lines():
            if line.startswith("data: {"):
                d = json.loads(line[6:])
                ch = d["choices"][0]
                text += ch["delta"].get("content") or ""
                if ch.get("logprobs"): n += len(ch["logprobs"]["content"])
    print("stream:", repr(text), "n logprobs", n)
    r = c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 40, "seed": 1,
        "response_format": {"type": "json_object"}, "logprobs": 2})
    b = r.json(); print(r.status_code, repr(b["choices"][0]["text"]), b["choices"][0]["finish_reason"], b["usage"])
    print(len(b["choices"][0]["logprobs"]["tokens"]))
