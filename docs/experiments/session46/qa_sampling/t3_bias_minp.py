"""logit_bias and min_p behaviour on both routes; interplay with response_format; seeds; greedy equality."""
import sys, json; sys.path.insert(0, "/tmp/qa46/qa")
from common import *
from server.model.tokenizer import Tokenizer
tok = Tokenizer()
fails = 0
def bad(m):
    global fails; fails += 1; print("BAD", m)
def ctoks(j):  # completions: token strings from logprobs
    return j["choices"][0]["logprobs"]["tokens"]
# 1. +100 forces token on completions (temperature 1, default penalties)
X = tok.encode(" world")[0]
c, j = comp(prompt="Hello", max_tokens=8, temperature=1.0, logit_bias={str(X): 100}, logprobs=1, seed=1)
print("force ' world':", c, repr(j["choices"][0]["text"]), j["choices"][0]["finish_reason"])
if j["choices"][0]["text"] != " world" * 8: bad("+100 did not force token on completions")
# chat: force
c, j = chat(max_tokens=8, temperature=1.0, logit_bias={str(X): 100}, seed=1, reasoning_effort="none")
m = j["choices"][0]["message"]; print("chat force:", repr(m.get("content")), repr(m.get("reasoning_content")), j["choices"][0]["finish_reason"])
if (m.get("content") or "") + (m.get("reasoning_content") or "") != " world" * 8: bad("+100 did not force on chat")
# 2. -100 bans greedy first token
c, j = comp(prompt="Hello", max_tokens=6, temperature=0, logprobs=1)
g = j["choices"][0]["text"]; gt = tok.encode(g)
print("greedy:", repr(g), gt)
ban = gt[0]
c, j2 = comp(prompt="Hello", max_tokens=6, temperature=0, logit_bias={str(ban): -100}, logprobs=1)
g2 = j2["choices"][0]["text"]; print("greedy banned first:", repr(g2), tok.encode(g2))
if ban in tok.encode(g2): bad("banned token appeared")
# logprobs stay the model's own: the first token's top logprob entry should equal the unbiased one's for the same token
lp1 = j["choices"][0]["logprobs"]["top_logprobs"][0]; lp2 = j2["choices"][0]["logprobs"]["top_logprobs"][0]
print("top_logprobs unbiased:", lp1, " biased:", lp2)
# 3. bias EOS +100 -> immediate empty stop
c, j = comp(prompt="Hello", max_tokens=8, temperature=1.0, logit_bias={"0": 100})
print("EOS +100:", repr(j["choices"][0]["text"]), j["choices"][0]["finish_reason"], j["usage"])
if j["choices"][0]["text"] != "" or j["choices"][0]["finish_reason"] != "stop": bad("EOS +100 did not end")
# 4. logit_bias with response_format: +100 on a token the grammar forbids must not break JSON
Y = tok.encode("Hello")[0]
for bias in ({str(Y): 100}, {"0": -100}, {"2375": -100, "124": -100, "2364": -100}, {"126": 100}, {"35": 100}):
    for route in ("chat", "comp"):
        f = chat if route == "chat" else comp
        c, j = f(response_format={"type": "json_object"}, max_tokens=60, temperature=1.0, logit_bias=bias, seed=2)
        ch = j["choices"][0]; t = ch["message"]["content"] if route == "chat" else ch["text"]
        ok = True
        try: ok = isinstance(json.loads(t), dict)
        except Exception: ok = False
        print(f"rf json_object + bias {bias} {route}: {c} {ch['finish_reason']} valid={ok} {t[:60]!r}")
        if ch["finish_reason"] == "stop" and not ok: bad(f"bias {bias} {route}: stop with invalid JSON")
        if ch["finish_reason"] == "length" and not t.startswith("{"): bad(f"bias {bias} {route}: not a JSON prefix")
# 5. min_p=1 equals greedy (temperature 1) on both routes
for route in ("chat", "comp"):
    f = chat if route == "chat" else comp
    key = (lambda j: j["choices"][0]["message"]["content"] + "|" + str(j["choices"][0]["message"].get("reasoning_content"))) if route == "chat" else (lambda j: j["choices"][0]["text"])
    c, g = f(max_tokens=20, temperature=0, presence_penalty=0, frequency_penalty=0)
    for s in range(3):
        c, m = f(max_tokens=20, temperature=1.0, min_p=1, seed=s, presence_penalty=0, frequency_penalty=0)
        if key(m) != key(g): bad(f"min_p=1 {route} seed {s} != greedy: {key(m)[:60]!r} vs {key(g)[:60]!r}")
    print(f"min_p=1 vs greedy {route}: checked")
# 6. seeds with min_p: same seed -> same; min_p 0.05 vs 0 differ maybe
for mp in (0, 0.05, 0.5):
    a = comp(max_tokens=30, temperature=1.5, min_p=mp, seed=11)[1]["choices"][0]["text"]
    b = comp(max_tokens=30, temperature=1.5, min_p=mp, seed=11)[1]["choices"][0]["text"]
    print(f"min_p={mp} seed11: same={a==b} {a[:50]!r}")
    if a != b: bad(f"min_p={mp} same seed differs")
# min_p absent == min_p 0
a = comp(max_tokens=30, temperature=1.5, seed=12)[1]["choices"][0]["text"]
b = comp(max_tokens=30, temperature=1.5, seed=12, min_p=0)[1]["choices"][0]["text"]
if a != b: bad("min_p absent != min_p 0")
# min_p with high temperature filters: min_p 0.9 with temp 2 -> should be near-greedy; check tokens drawn have prob >= 0.9*max under tempered dist is hard; count distinct outcomes
outs = set(comp(max_tokens=3, temperature=2.0, top_p=1, top_k=0, min_p=0.99, seed=s, presence_penalty=0, frequency_penalty=0)[1]["choices"][0]["text"] for s in range(8))
outs0 = set(comp(max_tokens=3, temperature=2.0, top_p=1, top_k=0, min_p=0, seed=s, presence_penalty=0, frequency_penalty=0)[1]["choices"][0]["text"] for s in range(8))
print("distinct outs min_p .99:", len(outs), " min_p 0:", len(outs0))
# 7. seed reproducibility with logit_bias + response_format + min_p together
rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "boolean"}}}, "required": ["a", "b"], "additionalProperties": False}, "strict": True}}
r1 = chat(max_tokens=80, temperature=1.2, min_p=0.02, logit_bias={"35": 3}, response_format=rf, seed=99)[1]
r2 = chat(max_tokens=80, temperature=1.2, min_p=0.02, logit_bias={"35": 3}, response_format=rf, seed=99)[1]
print("combined:", r1["choices"][0]["finish_reason"], r1["choices"][0]["message"]["content"][:80])
if r1["choices"][0]["message"]["content"] != r2["choices"][0]["message"]["content"]: bad("combined seed differs")
print("FAILS", fails)
