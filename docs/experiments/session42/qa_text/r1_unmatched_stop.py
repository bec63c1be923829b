"""R1: a stop string that never matches changes a chat reply: the whitespace the model wrote
before end-of-text is dropped when a stop string starts with it. In process, the project's
ScriptedScheduler (test/openai_helpers.py) hands the OpenAI layer fixed tokens; routes,
splitter and SSE are the real server's."""
from scripted import *
srv, c = start()
MS = [{"role": "user", "content": "hi"}]
for text, stop in ((">Hi  ", None), (">Hi  ", ["  Q"]), (">Hi \n", None), (">Hi \n", [" \nX"])):
    for stream in (False, True):
        f = script(srv, ids(text), reason="stop"); f.warm_prefix = lambda *a, **k: None
        body = dict(model="rwkv-7", messages=MS, **({"stop": stop} if stop else {}))
        if stream:
            ev = sse(c, "/v1/chat/completions", dict(body, stream=True))
            content = "".join(ch["delta"].get("content") or "" for e in ev if e != "[DONE]" for ch in e["choices"])
            fin = [ch["finish_reason"] for e in ev if e != "[DONE]" for ch in e["choices"] if ch["finish_reason"]]
        else:
            r = c.post("/v1/chat/completions", json=body).json()
            content, fin = r["choices"][0]["message"]["content"], r["choices"][0]["finish_reason"]
        print(f"model wrote {text!r} then end-of-text; stop={stop!r:10} stream={stream!s:5} -> content {content!r} finish {fin}")
import os; os._exit(0)
