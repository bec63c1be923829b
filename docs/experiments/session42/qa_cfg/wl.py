"""Mixed workload against a running server; prints problems; writes outputs JSON.

usage: wl.py URL OUT.json [--key K] [--conc N] [--long]
"""
import json, sys, time, threading, math, argparse
import httpx

ap = argparse.ArgumentParser()
ap.add_argument("url"); ap.add_argument("out")
ap.add_argument("--key"); ap.add_argument("--conc", type=int, default=4)
ap.add_argument("--long", action="store_true")
ap.add_argument("--think", action="store_true", help="don't send reasoning_effort none")
a = ap.parse_args()
H = {"Authorization": f"Bearer {a.key}"} if a.key else {}
c = httpx.Client(base_url=a.url, headers=H, timeout=180)
problems = []
out = {}
T0 = time.time()

def chk(name, r, code=200):
    if r.status_code != code:
        problems.append(f"{name}: HTTP {r.status_code} {r.text[:300]}")
        return False
    return True

def sse(name, r):
    body = r.text
    events = []
    for block in body.strip("\n").split("\n\n"):
        lines = [l for l in block.split("\n") if not l.startswith(":")]
        if not lines: continue
        if not all(l.startswith("data: ") for l in lines):
            problems.append(f"{name}: bad sse block {block[:200]!r}")
        events.append("\n".join(l[6:] for l in lines))
    if not events or events[-1] != "[DONE]":
        problems.append(f"{name}: stream not ending with [DONE]: {events[-3:]!r}")
    return [json.loads(e) for e in events if e != "[DONE]"]

RE = {} if a.think else {"reasoning_effort": "none"}
G = {"temperature": 0}
S = {"temperature": 1.0, "seed": 1234, "top_p": 0.9}

# meta
for p in ["/health", "/metrics", "/v1/models"]:
    r = c.get(p); chk(p, r)
    if p == "/v1/models" and r.status_code == 200:
        out["models"] = [m["id"] for m in r.json()["data"]]

def chat(msgs, stream=False, **kw):
    body = {"model": "rwkv-7", "messages": msgs, "max_tokens": 24, "stream": stream, **RE, **kw}
    r = c.post("/v1/chat/completions", json=body)
    if not chk(f"chat stream={stream} {kw}", r): return None
    if stream:
        fr = sse("chat-stream", r)
        content = "".join((f["choices"][0]["delta"].get("content") or "") for f in fr if f.get("choices"))
        reas = "".join((f["choices"][0]["delta"].get("reasoning_content") or "") for f in fr if f.get("choices"))
        fins = [f["choices"][0].get("finish_reason") for f in fr if f.get("choices") and f["choices"][0].get("finish_reason")]
        errs = [f for f in fr if "error" in f]
        if errs: problems.append(f"chat stream error frame {errs}")
        if len(fins) != 1: problems.append(f"chat stream finish reasons {fins}")
        return {"content": content, "reasoning": reas, "finish": fins}
    j = r.json()
    m = j["choices"][0]["message"]
    return {"content": m.get("content"), "reasoning": m.get("reasoning_content"),
            "finish": j["choices"][0]["finish_reason"], "usage": j.get("usage")}

# 2-turn chat, non-stream, greedy and seeded
for tag, samp in (("greedy", G), ("seeded", S)):
    m1 = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three rivers in Europe."}]
    r1 = chat(m1, **samp)
    if r1 is None: continue
    m2 = m1 + [{"role": "assistant", "content": r1["content"] or ""}, {"role": "user", "content": "And two in Asia?"}]
    r2 = chat(m2, **samp)
    r2s = chat(m2, stream=True, **samp)
    out[f"chat_{tag}_t1"] = r1; out[f"chat_{tag}_t2"] = r2; out[f"chat_{tag}_t2_stream"] = r2s
    if r2 and r2s and (r2["content"] or "", r2["reasoning"] or "") != (r2s["content"] or "", r2s["reasoning"] or ""):
        problems.append(f"chat {tag}: stream != non-stream: {r2!r} vs {r2s!r}")

# thinking on (default) stream
r = chat([{"role": "user", "content": "Why is the sky blue?"}], stream=True, reasoning_effort=None, **G) if False else None
body = {"model": "rwkv-7", "messages": [{"role": "user", "content": "Why is the sky blue?"}], "max_tokens": 16, "stream": True, **G}
r = c.post("/v1/chat/completions", json=body)
if chk("chat think stream", r):
    fr = sse("chat think", r)
    out["chat_think_default"] = ["".join((f["choices"][0]["delta"].get(k) or "") for f in fr if f.get("choices")) for k in ("content", "reasoning_content")]

# completion n=2 with stop
for tag, samp in (("greedy", G), ("seeded", S)):
    r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "The quick brown fox", "n": 2,
                                        "max_tokens": 24, "stop": ["e"], **samp})
    if chk(f"completion n=2 {tag}", r):
        j = r.json()
        if len(j["choices"]) != 2: problems.append(f"completion n=2 gave {len(j['choices'])}")
        out[f"compl_{tag}"] = [(ch["index"], ch["text"], ch["finish_reason"]) for ch in j["choices"]]
        for ch in j["choices"]:
            if "e" in ch["text"]: problems.append(f"stop string in text {ch['text']!r}")
# completion stream n=2
r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "The quick brown fox", "n": 2, "max_tokens": 24, "stop": ["e"], "stream": True, **S})
if chk("completion stream n=2", r):
    fr = sse("compl-stream", r)
    txt = {0: "", 1: ""}
    for f in fr:
        for ch in f.get("choices", []): txt[ch["index"]] += ch.get("text") or ""
    out["compl_seeded_stream"] = txt
    if "compl_seeded" in out and [t for _, t, _ in out["compl_seeded"]] != [txt[0], txt[1]]:
        problems.append(f"completion stream != non-stream {out['compl_seeded']} vs {txt}")

# long prompt greedy
if a.long:
    words = " ".join(f"w{i} alpha beta" for i in range(170))
    r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": words, "max_tokens": 16, **G})
    if chk("long completion", r):
        out["long_greedy"] = r.json()["choices"][0]["text"]; out["long_ptoks"] = r.json()["usage"]["prompt_tokens"]

# Task API
P = "User: Tell me about linear attention.\n\nAssistant:"
TG = {"temperature": 0}
r = c.post("/v1/tasks/create", json={"prompt": P, "max_tokens": 12, "stream": True, **TG})
if chk("task create stream", r):
    fr = sse("task create", r)
    tid = fr[0]["task_id"]
    out["task_create"] = "".join(f.get("data", "") for f in fr[1:])
    r = c.get(f"/v1/tasks/{tid}/stream"); chk("task stream replay", r)
    out["task_stream_replay"] = "".join(f.get("data", "") for f in sse("replay", r)[1:])
    r = c.post(f"/v1/tasks/{tid}/fork", json={"prompt": " More.", "max_tokens": 8, "stream": True})
    if chk("fork", r): out["task_fork"] = "".join(f.get("data", "") for f in sse("fork", r)[1:])
    r = c.post(f"/v1/tasks/{tid}/continue", json={"prompt": "\n\nUser: Go on.\n\nAssistant:", "max_tokens": 8, "stream": True})
    if chk("continue", r): out["task_continue"] = "".join(f.get("data", "") for f in sse("cont", r)[1:])
    r = c.post(f"/v1/tasks/{tid}/as_template")
    if chk("as_template", r):
        tpl = r.json()["task_id"]
        r = c.post(f"/v1/tasks/{tpl}/fork", json={"prompt": "\n\nUser: Summarise.\n\nAssistant:", "max_tokens": 8, "stream": True, "seed": 5, "temperature": 1})
        if chk("fork template", r): out["tpl_fork"] = "".join(f.get("data", "") for f in sse("tplfork", r)[1:])
        r = c.post(f"/v1/tasks/{tpl}/fork?tmp=true", json={"prompt": "\n\nUser: Summarise.\n\nAssistant:", "max_tokens": 8, "seed": 5, "temperature": 1})
        if chk("fork template tmp nonstream", r):
            t2 = r.json()["task_id"]
            for _ in range(600):
                g = c.get(f"/v1/tasks/{t2}/get_result")
                if not chk("get_result", g) or g.json()["finished"]: break
                time.sleep(0.1)
            else: problems.append("tmp fork never finished")
            if g.status_code == 200:
                out["tpl_fork_tmp"] = g.json()["result"]
                if out.get("tpl_fork") != g.json()["result"]:
                    problems.append(f"template fork stream vs tmp differ {out.get('tpl_fork')!r} {g.json()['result']!r}")
        r = c.post(f"/v1/tasks/{tpl}/delete?force=true"); chk("delete tpl", r)
    r = c.get(f"/v1/tasks/{tid}/status"); chk("status", r)
# FIM
r = c.post("/v1/tasks/fim", json={"prefix": "def add(a, b):\n    ", "suffix": "\n\nprint(add(1,2))\n", "max_tokens": 12, "stream": True, **TG})
if chk("fim task", r): out["fim_task"] = "".join(f.get("data", "") for f in sse("fim", r)[1:])
r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "def add(a, b):\n    ", "suffix": "\n\nprint(add(1,2))\n", "max_tokens": 12, **G})
if chk("fim completions", r): out["fim_compl"] = r.json()["choices"][0]["text"]

# concurrency: conc chats at once, seeded (non-stream) + streamed
res = {}
def worker(i):
    try:
        cc = httpx.Client(base_url=a.url, headers=H, timeout=300)
        body = {"model": "rwkv-7", "messages": [{"role": "user", "content": f"Count to {i+3}."}],
                "max_tokens": 20, "temperature": 1, "seed": 100 + i, "stream": bool(i % 2), **RE}
        r = cc.post("/v1/chat/completions", json=body)
        if r.status_code != 200:
            res[i] = ("HTTP", r.status_code, r.text[:200]); return
        if i % 2:
            fr = sse(f"conc{i}", r)
            res[i] = "".join((f["choices"][0]["delta"].get("content") or "") for f in fr if f.get("choices"))
        else:
            res[i] = r.json()["choices"][0]["message"]["content"]
    except Exception as e:
        res[i] = ("EXC", repr(e))
ths = [threading.Thread(target=worker, args=(i,)) for i in range(a.conc)]
[t.start() for t in ths]; [t.join(300) for t in ths]
if any(t.is_alive() for t in ths): problems.append("concurrent worker hung")
out["conc"] = [res.get(i) for i in range(a.conc)]
for i, v in res.items():
    if isinstance(v, tuple): problems.append(f"conc {i}: {v}")

for p in ["/health", "/metrics"]:
    r = c.get(p); chk(p, r)
out["health_after"] = c.get("/health").json()
json.dump(out, open(a.out, "w"), indent=1, ensure_ascii=False)
print(f"done in {time.time()-T0:.1f}s; problems: {len(problems)}")
for p in problems: print("  PROBLEM", p)
