exec(open(__file__.rsplit("/", 1)[0] + "/qa.py").read())  # (ran as /tmp/qa34c/qa.py)
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
S = {"temperature": 1.0, "top_p": 0.9, "top_k": 50}
P = "User: Describe a lighthouse at dusk in detail.\n\nAssistant:"
ta, tb, _ = tcall("create-seeded", "/v1/tasks/create", None, {"prompt": P, "max_tokens": 40, "seed": 1, **S})
for i in range(4):
    tcall(f"fork-seeded{i}", f"/v1/tasks/{ta}/fork", f"/v1/tasks/{tb}/fork", {"prompt": "\n\nUser: more?\n\nAssistant:", "max_tokens": 30, "seed": 100 + i})
    tcall(f"fork-tmp-seeded{i}", f"/v1/tasks/{ta}/fork?tmp=true", f"/v1/tasks/{tb}/fork?tmp=true", {"prompt": "\n\nUser: more?\n\nAssistant:", "max_tokens": 30, "seed": 100 + i})
for i in range(5):
    tcall(f"continue{i}", f"/v1/tasks/{ta}/continue", f"/v1/tasks/{tb}/continue", {"prompt": f"\n\nUser: go on {i}\n\nAssistant:", "max_tokens": 30, "seed": 200 + i})
# tmp tasks with shared prefix
for i in range(4):
    tcall(f"tmp{i}", "/v1/tasks/tmp", None, {"prompt": P + " The lighthouse" + " stood" * i, "max_tokens": 30, "seed": 3, **S})
    tcall(f"tmp-greedy{i}", "/v1/tasks/tmp", None, {"prompt": P + " The lighthouse" + " stood" * i, "max_tokens": 30, "temperature": 0})
# template
TP = "System: " + "You translate things precisely. " * 20 + "\n\nUser: Understood?\n\nAssistant: Yes.\n\n"
ja, jb = both("POST", "/v1/tasks/create", body={"prompt": TP, "max_tokens": 0, "seed": 9, **S}, label="tpl-create")
wait(ca, ja["task_id"]); wait(cb, jb["task_id"])
xa, xb = both("POST", f"/v1/tasks/{ja['task_id']}/as_template", f"/v1/tasks/{jb['task_id']}/as_template", label="as_template")
A_t, B_t = xa["task_id"], xb["task_id"]
print("templates", A_t, B_t)
for i in range(4):
    tcall(f"tpl-fork-seeded{i}", f"/v1/tasks/{A_t}/fork", f"/v1/tasks/{B_t}/fork", {"prompt": f"User: Translate item {i}\n\nAssistant:", "max_tokens": 30, "seed": 40 + i})
    tcall(f"tpl-fork-noseed{i}", f"/v1/tasks/{A_t}/fork", f"/v1/tasks/{B_t}/fork", {"prompt": f"User: Translate item {i}\n\nAssistant:", "max_tokens": 30})
    tcall(f"tpl-fork-greedy{i}", f"/v1/tasks/{A_t}/fork?tmp=true", f"/v1/tasks/{B_t}/fork?tmp=true", {"prompt": f"User: Translate item {i}\n\nAssistant:", "max_tokens": 30, "temperature": 0})
# OpenAI with template model
for i in range(3):
    for ep, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": f"Translate thing {i}"}], "reasoning_effort": "none"}),
                     ("/v1/completions", {"prompt": f"User: Translate thing {i}\n\nAssistant:"})):
        ba = {"model": "rwkv-7:" + A_t, "max_tokens": 30, "seed": 60 + i, **S, **body}
        bb = dict(ba, model="rwkv-7:" + B_t)
        ra = ca.post(ep, json=ba); rb = cb.post(ep, json=bb)
        if ra.status_code != 200 or rb.status_code != 200: findings.append(f"tpl-openai {ep}: {ra.status_code} {rb.status_code} {ra.text[:200]}")
        cmp(f"tpl-openai{ep}{i}", ra.json(), rb.json(), ba)
        bg = dict(ba, temperature=0); bg.pop("seed")
        ra = ca.post(ep, json=bg); rb = cb.post(ep, json=dict(bg, model="rwkv-7:" + B_t))
        cmp(f"tpl-openai-greedy{ep}{i}", ra.json(), rb.json(), bg)
# import_state with fixed name, then openai rwkv-7:_imp
ea = ca.get(f"/v1/tasks/{A_t}/export_state").content; eb = cb.get(f"/v1/tasks/{B_t}/export_state").content
print("export equal:", ea == eb, len(ea))
ia = ca.post("/v1/tasks/import_state?name=_qaimp", content=ea); ib = cb.post("/v1/tasks/import_state?name=_qaimp", content=eb)
print(ia.status_code, ia.text[:200], ib.status_code)
for i in range(3):
    tcall(f"imp-fork{i}", "/v1/tasks/_qaimp/fork", None, {"prompt": f"User: Translate item {i}\n\nAssistant:", "max_tokens": 30, "seed": 40 + i, **S})
    body = {"model": "rwkv-7:_qaimp", "messages": [{"role": "user", "content": f"Translate thing {i}"}], "reasoning_effort": "none", "max_tokens": 30, "seed": 60 + i, **S}
    ja, jb = both("POST", "/v1/chat/completions", body=body, label=f"imp-openai{i}")
    cmp(f"imp-openai{i}", ja, jb, body)
# multiturn chat on template model
msgs = []
for t in range(6):
    msgs.append({"role": "user", "content": f"Translate sentence number {t}."})
    body = {"model": "rwkv-7:_qaimp", "messages": list(msgs), "reasoning_effort": "none", "max_tokens": 30, "seed": 70 + t, **S}
    ja, jb = both("POST", "/v1/chat/completions", body=body, label=f"imp-multiturn{t}")
    cmp(f"imp-multiturn{t}", ja, jb, body)
    msgs.append({"role": "assistant", "content": ja["choices"][0]["message"]["content"] or ""})
print(stats); print("\n".join(findings))
