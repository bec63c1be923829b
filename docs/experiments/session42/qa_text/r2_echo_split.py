"""R2: /v1/completions echo with a prompt of token ids ending inside a character that the reply
completes: echo + text shows two U+FFFD where the document has the character. In process, the
project's ScriptedScheduler (test/openai_helpers.py) hands out the reply's tokens."""
from scripted import *
srv, c = start()
zh = "\u4e2d".encode()                  # e4 b8 ad
prompt, reply = ids("A", zh[:2]), ids(zh[2:], "B")
print("prompt ids", prompt, [TOK.token_bytes(t) for t in prompt], "reply ids", reply, [TOK.token_bytes(t) for t in reply])
print("prompt + reply decoded as one document:", repr(TOK.decode(prompt + reply)))
f = script(srv, reply); f.warm_prefix = lambda *a, **k: None
r = c.post("/v1/completions", json=dict(prompt=prompt, echo=True, max_tokens=10)).json()
print("non-stream echo+text:", repr(r["choices"][0]["text"]), r["choices"][0]["finish_reason"], r["usage"])
f = script(srv, reply)
ev = sse(c, "/v1/completions", dict(prompt=prompt, echo=True, max_tokens=10, stream=True))
print("stream text deltas:  ", [ch["text"] for e in ev if e != "[DONE]" for ch in e["choices"]])
import os; os._exit(0)
