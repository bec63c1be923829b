exec(open(__file__.rsplit("/", 1)[0] + "/qa.py").read())  # (ran as /tmp/qa34c/qa.py)
import concurrent.futures as cf
S = {"temperature": 1.0, "top_p": 0.9, "top_k": 50}
def comp(label, body, ep="/v1/completions"):
    ja, jb = both("POST", ep, body=body, label=label); cmp(label, ja, jb, body); return ja
def wait(c, tid):
    t0 = time.time()
    while True:
        r = c.get(f"/v1/tasks/{tid}/get_result").json()
        if r.get("finished"): return r
        if time.time() - t0 > 60: findings.append(f"hang {tid}"); return r
        time.sleep(0.1)
def tcall(label, pa, pb, body):
    ja, jb = both("POST", pa, pb, body=body, label=label)
    ta, tb = ja.get("task_id"), jb.get("task_id")
    ra, rb = wait(ca, ta), wait(cb, tb)
    cmp(label, {"result": ra.get("result")}, {"result": rb.get("result")}, body)
    return ta, tb, ra
# long prompt (multi-step prefill > 512 tokens), then extensions crossing 32-aligned points
LONG = " ".join(f"w{i} alpha beta" for i in range(700))
for i, extra in enumerate(["", " x", " x y", " x y z q r s t u v w", " " + "m " * 40]):
    comp(f"long{i}", {"model": "rwkv-7", "prompt": LONG + extra, "max_tokens": 20, "seed": 77, **S})
    comp(f"long-greedy{i}", {"model": "rwkv-7", "prompt": LONG + extra, "max_tokens": 20, "temperature": 0})
# token-id prompts of lengths around 32 multiples
ids = [(i * 7919) % 60000 + 100 for i in range(200)]
for L in (31, 32, 33, 63, 64, 65, 96, 97, 128, 200):
    comp(f"ids{L}", {"model": "rwkv-7", "prompt": ids[:L], "max_tokens": 10, "seed": L, **S})
for L in (200, 97, 64, 33):
    comp(f"ids-again{L}", {"model": "rwkv-7", "prompt": ids[:L], "max_tokens": 10, "temperature": 0})
# chat: edit last user message; regenerate same turn
msgs = [{"role": "system", "content": "Be brief. " * 50}]
for t in range(4):
    msgs.append({"role": "user", "content": f"Q{t}"})
    j = comp(f"edit-base{t}", {"model": "rwkv-7", "messages": msgs, "max_tokens": 30, "seed": t, "reasoning_effort": "none", **S}, "/v1/chat/completions")
    msgs.append({"role": "assistant", "content": j["choices"][0]["message"]["content"] or ""})
msgs2 = msgs[:-2] + [{"role": "user", "content": "Q3 edited"}]
comp("edit-last", {"model": "rwkv-7", "messages": msgs2, "max_tokens": 30, "seed": 3, "reasoning_effort": "none", **S}, "/v1/chat/completions")
comp("regen-last", {"model": "rwkv-7", "messages": msgs[:-1], "max_tokens": 30, "seed": 3, "reasoning_effort": "none", **S}, "/v1/chat/completions")
comp("regen-last-greedy", {"model": "rwkv-7", "messages": msgs[:-1], "max_tokens": 30, "temperature": 0, "reasoning_effort": "none"}, "/v1/chat/completions")
# thinking mode multiturn using reasoning as history (assistant message with reasoning_content omitted)
# tools
tools = [{"type": "function", "function": {"name": "get_weather", "description": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
for k in range(2):
    comp(f"tools{k}", {"model": "rwkv-7", "messages": [{"role": "user", "content": "weather in Paris?"}], "tools": tools, "max_tokens": 30, "seed": 5, **S}, "/v1/chat/completions")
# FIM
for k in range(2):
    comp(f"suffix{k}", {"model": "rwkv-7", "prompt": "def add(a, b):\n", "suffix": "\n    return c\n", "max_tokens": 20, "seed": 2, **S})
    tcall(f"fim{k}", "/v1/tasks/fim", None, {"prefix": "def add(a, b):\n", "suffix": "\n    return c\n", "max_tokens": 20, "seed": 2, **S})
# Task API penalties
for k in range(2):
    tcall(f"task-pen{k}", "/v1/tasks/tmp", None, {"prompt": LONG[:2000], "max_tokens": 40, "seed": 12, "presence_penalty": 0.4, "repetition_penalty": 0.3, "penalty_decay": 0.99, **S})
# as_template of a task that generated tokens, then forks and continue of forks
ta, tb, _ = tcall("gen-then-tpl", "/v1/tasks/create", None, {"prompt": "User: Tell a story\n\nAssistant:", "max_tokens": 25, "seed": 31, **S})
xa, xb = both("POST", f"/v1/tasks/{ta}/as_template", f"/v1/tasks/{tb}/as_template", label="as_tpl2")
for i in range(3):
    fa, fb, _ = tcall(f"tpl2-fork{i}", f"/v1/tasks/{xa['task_id']}/fork", f"/v1/tasks/{xb['task_id']}/fork", {"prompt": "\n\nUser: continue\n\nAssistant:", "max_tokens": 20, "seed": 90 + i})
    tcall(f"tpl2-fork-cont{i}", f"/v1/tasks/{fa}/continue", f"/v1/tasks/{fb}/continue", {"prompt": "\n\nUser: and?\n\nAssistant:", "max_tokens": 20, "seed": 95 + i})
# template via tmp with max_tokens=0 then fork of tmp
ja, jb = both("POST", "/v1/tasks/tmp", body={"prompt": "System: tmp template prompt " * 20, "max_tokens": 0}, label="tmp-tpl")
wait(ca, ja["task_id"]); wait(cb, jb["task_id"])
for i in range(2):
    tcall(f"tmp-tpl-fork{i}", f"/v1/tasks/{ja['task_id']}/fork?tmp=true", f"/v1/tasks/{jb['task_id']}/fork?tmp=true", {"prompt": " hello", "max_tokens": 20, "seed": 1 + i, **S})
# concurrent batches: 8 requests at once per server, shared prefixes
def conc(label, bodies, ep="/v1/completions"):
    res = {}
    for name, c in (("A", ca), ("B", cb)):
        with cf.ThreadPoolExecutor(len(bodies)) as ex:
            res[name] = list(ex.map(lambda b: c.post(ep, json=b).json(), bodies))
    for i, (x, y) in enumerate(zip(res["A"], res["B"])):
        cmp(f"{label}[{i}]", x, y, bodies[i])
for r in range(3):
    conc(f"conc{r}", [{"model": "rwkv-7", "prompt": LONG[: 300 + 137 * i] + f" tail{r}", "max_tokens": 25, "seed": i, **S} for i in range(8)])
    conc(f"conc-chat{r}", [{"model": "rwkv-7", "messages": [{"role": "system", "content": "Shared system. " * 60}, {"role": "user", "content": f"user {i} round {r}"}], "max_tokens": 25, "seed": i, "reasoning_effort": "none", **S} for i in range(8)], "/v1/chat/completions")
print(stats); print("\n".join(findings))
