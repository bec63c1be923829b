exec(open(__file__.rsplit("/", 1)[0] + "/qa.py").read())  # (ran as /tmp/qa34c/qa.py)
def comp(label, body):
    ja, jb = both("POST", "/v1/completions", body=body, label=label)
    cmp(label, ja, jb, body); return ja
def stream(label, path, body):
    outs = []
    for c in (ca, cb):
        txt = []
        with c.stream("POST", path, json=body) as r:
            if r.status_code != 200: findings.append(f"{label}: HTTP {r.status_code}"); stats["err"] += 1
            for line in r.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    d = json.loads(line[6:])
                    for ch in d.get("choices", []):
                        txt.append((ch.get("index"), ch.get("text") or (ch.get("delta") or {}).get("content") or "", (ch.get("delta") or {}).get("reasoning_content") or "", ch.get("finish_reason")))
                    if "error" in d: txt.append(("ERR", d["error"]))
        # collapse per-index
        agg = {}
        for i, t, rc, fr in txt:
            a = agg.setdefault(str(i), ["", "", None]); 
            if i == "ERR": a[0] += json.dumps(t); continue
            a[0] += t; a[1] += rc; a[2] = fr or a[2]
        outs.append(agg)
    cmp(label, outs[0], outs[1], body)
    return outs[0]
base = "The history of the river valley begins"
S = {"temperature": 1.0, "top_p": 0.9, "top_k": 50}
p = base
for i in range(8):
    j = comp(f"extend-seeded{i}", {"model": "rwkv-7", "prompt": p, "max_tokens": 30, "seed": 7 + i, **S})
    p = p + j["choices"][0]["text"] + " and then"
p = base
for i in range(8):
    j = comp(f"extend-greedy{i}", {"model": "rwkv-7", "prompt": p, "max_tokens": 30, "temperature": 0})
    p = p + j["choices"][0]["text"]   # exact continuation of generated text
# same prompt repeated (whole-prompt hit with logits)
for k in range(3):
    comp(f"repeat-seeded{k}", {"model": "rwkv-7", "prompt": p, "max_tokens": 20, "seed": 5, **S})
    comp(f"repeat-greedy{k}", {"model": "rwkv-7", "prompt": p, "max_tokens": 20, "temperature": 0})
# prefixes of p (shorter than cached)
for cut in (len(p)//3, len(p)//2, len(p)-3):
    comp(f"prefix-cut{cut}", {"model": "rwkv-7", "prompt": p[:cut], "max_tokens": 20, "seed": 9, **S})
# n=2 seeded
for k in range(3):
    comp(f"n2-comp{k}", {"model": "rwkv-7", "prompt": p, "max_tokens": 25, "n": 2, "seed": 11 + k, **S})
ja, jb = both("POST", "/v1/chat/completions", body={"model": "rwkv-7", "messages": [{"role": "user", "content": "hello there"}], "n": 2, "seed": 3, "max_tokens": 30, "reasoning_effort": "none", **S}, label="n2-chat")
cmp("n2-chat", ja, jb)
ja, jb = both("POST", "/v1/chat/completions", body={"model": "rwkv-7", "messages": [{"role": "user", "content": "hello there"}], "n": 2, "seed": 3, "max_tokens": 30, "reasoning_effort": "none", **S}, label="n2-chat-again")
cmp("n2-chat-again", ja, jb)
# stop strings: take greedy output and choose a stop in the middle
g = comp("stop-src", {"model": "rwkv-7", "prompt": base + " in", "max_tokens": 60, "temperature": 0})["choices"][0]["text"]
st = g[len(g)//2: len(g)//2 + 3]
for k in range(2):
    comp(f"stop-greedy{k} stop={st!r}", {"model": "rwkv-7", "prompt": base + " in", "max_tokens": 60, "temperature": 0, "stop": [st]})
    comp(f"stop-seeded{k}", {"model": "rwkv-7", "prompt": base + " in", "max_tokens": 60, "seed": 4, "stop": ["e", "\n"], **S})
# max tokens small and large
for mt in (1, 2, 3, 300, 800):
    comp(f"maxtok{mt}-seeded", {"model": "rwkv-7", "prompt": p, "max_tokens": mt, "seed": 21, **S})
    comp(f"maxtok{mt}-greedy", {"model": "rwkv-7", "prompt": p, "max_tokens": mt, "temperature": 0})
# streaming
stream("stream-comp-n2", "/v1/completions", {"model": "rwkv-7", "prompt": p, "max_tokens": 40, "n": 2, "seed": 33, "stream": True, **S})
stream("stream-comp-stop", "/v1/completions", {"model": "rwkv-7", "prompt": base + " in", "max_tokens": 60, "temperature": 0, "stop": [st], "stream": True})
msgs = [{"role": "system", "content": "You are helpful. " * 30}]
for t in range(6):
    msgs.append({"role": "user", "content": f"question {t}?"})
    o = stream(f"stream-chat-turn{t}", "/v1/chat/completions", {"model": "rwkv-7", "messages": msgs, "max_tokens": 40, "seed": 50 + t, "stream": True, **S})
    msgs.append({"role": "assistant", "content": o["0"][0]})
# penalties
for k in range(2):
    comp(f"penalty{k}", {"model": "rwkv-7", "prompt": p, "max_tokens": 60, "seed": 8, "presence_penalty": 0.5, "frequency_penalty": 0.3, **S})
print(stats); print("\n".join(findings))
