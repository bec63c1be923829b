"""Upgrade QA driver. usage:
  qa.py old URL OUTDIR          # populate a fresh DB on an old server, record outputs
  qa.py k9 URL OUTDIR           # burst of writes (caller kill -9s right after)
  qa.py new URL OUTDIR OLDDIR   # check old records on the new server, compare
  qa.py probe URL OUTDIR        # read-only look at list/models/get_result of everything
"""
import json, sys, time, os
import httpx

P0 = "User: Tell me about rivers.\n\nAssistant:"
P1 = "User: What is the capital of France?\n\nAssistant:"
P2 = "User: Write a very long story about a dragon.\n\nAssistant:"
P3 = "User: You are a precise technical translator.\n\nAssistant: Understood.\n\n"
P4 = "User: Translate: Hello world\n\nAssistant:"
P5 = "\n\nUser: And of Germany?\n\nAssistant:"
P6 = "User: Count to a thousand.\n\nAssistant:"
G = {"temperature": 0}


def cl(url):
    return httpx.Client(base_url=url, timeout=120)


def wait(c, tid, limit=120):
    t0 = time.time()
    while time.time() - t0 < limit:
        r = c.get(f"/v1/tasks/{tid}/get_result")
        if r.status_code != 200:
            return {"http": r.status_code, "body": r.text[:300]}
        j = r.json()
        if j.get("finished"):
            return j
        time.sleep(0.1)
    return {"timeout": True, **j}


def post(c, path, body=None, **kw):
    r = c.post(path, json=body, **kw)
    try:
        j = r.json()
    except Exception:
        j = r.text[:300]
    return r.status_code, j


def run_and_wait(c, path, body):
    s, j = post(c, path, body)
    if s != 200:
        return {"http": s, "body": j}
    res = wait(c, j["task_id"])
    res["task_id"] = j["task_id"]
    return res


def state_pth(path):
    import torch
    g = torch.Generator().manual_seed(5)
    sd = {f"blocks.{i}.att.time_state": torch.randn(2, 64, 64, generator=g) * 0.3 for i in range(2)}
    torch.save(sd, path)


def forks(c, tpls):
    out = {}
    for t in tpls:
        out[t] = {
            "greedy": run_and_wait(c, f"/v1/tasks/{t}/fork?tmp=true", {"prompt": P4, "max_tokens": 30, **G}),
            "seeded": run_and_wait(c, f"/v1/tasks/{t}/fork?tmp=true",
                                   {"prompt": P4, "max_tokens": 30, "temperature": 1.0, "top_p": 0.9, "seed": 7}),
        }
    return out


def old(url, outd):
    os.makedirs(outd, exist_ok=True)
    c = cl(url)
    R = {}
    R["tmp_greedy"] = run_and_wait(c, "/v1/tasks/tmp", {"prompt": P0, "max_tokens": 40, **G})
    R["T_fin"] = run_and_wait(c, "/v1/tasks/create", {"prompt": P1, "max_tokens": 30, **G})
    R["T_cont"] = run_and_wait(c, "/v1/tasks/create", {"prompt": P1, "max_tokens": 30, **G})
    R["T_seeded"] = run_and_wait(c, "/v1/tasks/create", {"prompt": P1, "max_tokens": 30, "temperature": 1.0,
                                                          "top_p": 0.9, "seed": 123})
    fin, cont = R["T_fin"]["task_id"], R["T_cont"]["task_id"]
    # what a continue of T_cont will give: a fork of its twin T_fin with P5 (same state)
    R["fork_fin_P5"] = run_and_wait(c, f"/v1/tasks/{fin}/fork?tmp=true", {"prompt": P5, "max_tokens": 20, **G})
    # stopped mid-way
    s, j = post(c, "/v1/tasks/create", {"prompt": P2, "max_tokens": 20000, **G})
    stop_id = j["task_id"]
    time.sleep(2.0)
    R["stop_http"] = post(c, f"/v1/tasks/{stop_id}/stop")
    R["T_stop"] = wait(c, stop_id)
    R["T_stop"]["task_id"] = stop_id
    R["T_stop_status"] = c.get(f"/v1/tasks/{stop_id}/status").json()
    # template from a prompt
    s, j = post(c, "/v1/tasks/create", {"prompt": P3, "max_tokens": 0, **G})
    R["T_tpl0"] = j
    s, j = post(c, f"/v1/tasks/{j['task_id']}/as_template")
    R["TPL_prompt"] = (s, j)
    tpl_prompt = j["task_id"]
    s, j = post(c, f"/v1/tasks/{fin}/as_template")
    R["TPL_fin"] = (s, j)
    tpl_fin = j["task_id"]
    # exports
    for name, tid in [("T_fin", fin), ("TPL_prompt", tpl_prompt)]:
        r = c.get(f"/v1/tasks/{tid}/export_state")
        R[f"export_{name}"] = r.status_code
        open(f"{outd}/{name}.state", "wb").write(r.content)
    r = c.post("/v1/tasks/import_state?name=imp_fin", content=open(f"{outd}/T_fin.state", "rb").read())
    R["import_fin"] = (r.status_code, r.text[:300])
    state_pth(f"{outd}/tuned.pth")
    r = c.post("/v1/tasks/import_state?name=imp_pth", content=open(f"{outd}/tuned.pth", "rb").read())
    R["import_pth"] = (r.status_code, r.text[:300])
    R["tpls"] = [tpl_prompt, tpl_fin, "_imp_fin", "_imp_pth"]
    R["forks"] = forks(c, R["tpls"])
    R["list"] = c.get("/v1/tasks/list").json()
    R["models"] = [m["id"] for m in c.get("/v1/models").json()["data"]]
    # running and pending (batch size 1: the second one waits for the slot)
    s, j = post(c, "/v1/tasks/create", {"prompt": P6, "max_tokens": 20000, **G})
    R["T_run"] = j
    s, j = post(c, "/v1/tasks/create", {"prompt": P2 * 20, "max_tokens": 50, **G})
    R["T_pend"] = j
    time.sleep(1.5)
    R["T_run_status"] = c.get(f"/v1/tasks/{R['T_run']['task_id']}/status").json()
    R["T_pend_status"] = c.get(f"/v1/tasks/{R['T_pend']['task_id']}/status").json()
    json.dump(R, open(f"{outd}/old.json", "w"), indent=1)
    print(json.dumps({k: R[k] for k in ("tmp_greedy", "T_fin", "T_stop_status", "TPL_prompt", "TPL_fin",
                                        "import_fin", "import_pth", "T_run_status", "T_pend_status")},
                     indent=None)[:3000])


def k9(url, outd):
    """acknowledged writes right before the caller's kill -9"""
    c = cl(url)
    O = json.load(open(f"{outd}/old.json"))
    R = {"creates": []}
    R["stop_run"] = post(c, f"/v1/tasks/{O['T_run']['task_id']}/stop")
    R["pend"] = wait(c, O["T_pend"]["task_id"]).get("finished")
    s, j = post(c, "/v1/tasks/create", {"prompt": P6, "max_tokens": 20000, **G})
    R["k9_running"] = j.get("task_id")
    s, j = post(c, f"/v1/tasks/{R['k9_running']}/stop")  # free the slot again, keep it finished
    ids = [post(c, "/v1/tasks/create", {"prompt": P1 + str(i), "max_tokens": 3, **G})[1]["task_id"] for i in range(6)]
    for t in ids:
        R["creates"].append((t, wait(c, t).get("finished")))
    s, j = post(c, "/v1/tasks/create", {"prompt": P3 + "k9", "max_tokens": 0, **G})
    s, j = post(c, f"/v1/tasks/{j['task_id']}/as_template")
    R["k9_tpl"] = (s, j.get("task_id"))
    r = c.post("/v1/tasks/import_state?name=k9imp", content=open(f"{outd}/T_fin.state", "rb").read())
    R["k9_import"] = (r.status_code, r.text[:200])
    R["t_ack"] = time.time()
    json.dump(R, open(f"{outd}/k9.json", "w"), indent=1)
    print(json.dumps(R))


def stream_text(c, tid, pos=0):
    txt, err = "", None
    with c.stream("GET", f"/v1/tasks/{tid}/stream?pos={pos}") as r:
        if r.status_code != 200:
            return {"http": r.status_code, "body": r.read().decode()[:300]}
        for line in r.iter_lines():
            if not line.startswith("data:"):
                continue
            d = line[5:].strip()
            if d == "[DONE]":
                break
            try:
                j = json.loads(d)
            except Exception:
                txt += d
                continue
            if "error" in j:
                err = j
            txt += j.get("data", "") if isinstance(j, dict) and isinstance(j.get("data"), str) else ""
    return {"text": txt, "error": err}


def new(url, outd, oldd):
    os.makedirs(outd, exist_ok=True)
    c = cl(url)
    O = json.load(open(f"{oldd}/old.json"))
    N, F = {}, []  # results, findings (mismatches)

    def cmp(name, a, b):
        ok = a == b
        F.append(("OK " if ok else "DIFF ") + name + ("" if ok else f"  old={a!r}  new={b!r}"))

    N["health"] = c.get("/health").json()
    N["list"] = c.get("/v1/tasks/list").json()
    N["models"] = [m["id"] for m in c.get("/v1/models").json()["data"]]
    cmp("list db_tasks superset", True, set(O["list"]["db_tasks"]) <= set(N["list"]["db_tasks"]))
    for t in O["tpls"]:
        cmp(f"models lists {t}", True, f"rwkv-7:{t}" in N["models"])
    N["tmp_greedy"] = run_and_wait(c, "/v1/tasks/tmp", {"prompt": P0, "max_tokens": 40, **G})
    cmp("tmp greedy (numerics)", O["tmp_greedy"].get("result"), N["tmp_greedy"].get("result"))
    ids = {k: O[k]["task_id"] for k in ("T_fin", "T_cont", "T_seeded", "T_stop", "T_run", "T_pend")}
    for k, tid in ids.items():
        r = c.get(f"/v1/tasks/{tid}/get_result")
        s = c.get(f"/v1/tasks/{tid}/status")
        N[f"get_{k}"] = (r.status_code, r.json() if r.status_code < 500 else r.text[:300])
        N[f"status_{k}"] = (s.status_code, s.json() if s.status_code < 500 else s.text[:300])
        F.append(f"INFO {k} {tid}: get_result {r.status_code} status {N[f'status_{k}']}")
    for k in ("T_fin", "T_seeded", "T_stop"):
        g = N[f"get_{k}"]
        cmp(f"get_result {k} text", O[k].get("result"), g[1].get("result") if g[0] == 200 else g)
    N["stream_T_fin"] = stream_text(c, ids["T_fin"])
    cmp("stream T_fin text", O["T_fin"].get("result"), N["stream_T_fin"].get("text"))
    N["stream_T_stop"] = stream_text(c, ids["T_stop"])
    cmp("stream T_stop text", O["T_stop"].get("result"), N["stream_T_stop"].get("text"))
    # continue old T_cont: should equal the old fork of its twin with P5
    N["cont_T_cont"] = run_and_wait(c, f"/v1/tasks/{ids['T_cont']}/continue", {"prompt": P5, "max_tokens": 20, **G})
    cmp("continue T_cont == old fork(T_fin,P5)", O["fork_fin_P5"].get("result"), N["cont_T_cont"].get("result"))
    N["fork_fin_P5"] = run_and_wait(c, f"/v1/tasks/{ids['T_fin']}/fork?tmp=true", {"prompt": P5, "max_tokens": 20, **G})
    cmp("fork T_fin P5", O["fork_fin_P5"].get("result"), N["fork_fin_P5"].get("result"))
    # continue the SIGTERMed running task and the pending one
    for k in ("T_run", "T_pend", "T_stop"):
        N[f"cont_{k}"] = run_and_wait(c, f"/v1/tasks/{ids[k]}/continue", {"prompt": P5, "max_tokens": 10, **G})
        F.append(f"INFO continue {k}: {str(N[f'cont_{k}'])[:200]}")
    # template forks
    N["forks"] = forks(c, O["tpls"])
    for t in O["tpls"]:
        for m in ("greedy", "seeded"):
            cmp(f"fork {t} {m}", O["forks"][t][m].get("result"), N["forks"][t][m].get("result"))
    # as_template of old finished/stopped record
    s, j = post(c, f"/v1/tasks/{ids['T_seeded']}/as_template")
    N["as_tpl_seeded"] = (s, j)
    F.append(f"INFO as_template old T_seeded: {s} {j}")
    if s == 200:
        N["fork_new_tpl"] = run_and_wait(c, f"/v1/tasks/{j['task_id']}/fork?tmp=true", {"prompt": P4, "max_tokens": 10, **G})
        F.append(f"INFO fork of it: {str(N['fork_new_tpl'])[:200]}")
    # export old record on new; import old exported files
    r = c.get(f"/v1/tasks/{ids['T_fin']}/export_state")
    N["export_T_fin_new"] = r.status_code
    open(f"{outd}/T_fin.new.state", "wb").write(r.content)
    F.append(f"INFO export old T_fin on new: {r.status_code}, {len(r.content)} bytes vs old {os.path.getsize(oldd + '/T_fin.state')}; identical={r.content == open(oldd + '/T_fin.state', 'rb').read()}")
    for nm, f in [("new_imp_fin", "T_fin.state"), ("new_imp_tpl", "TPL_prompt.state"), ("new_imp_pth", "tuned.pth")]:
        r = c.post(f"/v1/tasks/import_state?name={nm}", content=open(f"{oldd}/{f}", "rb").read())
        N[f"import_{nm}"] = (r.status_code, r.text[:300])
        F.append(f"INFO import old {f} on new: {r.status_code} {r.text[:200]}")
    if N["import_new_imp_fin"][0] == 200:
        f2 = forks(c, ["_new_imp_fin"])["_new_imp_fin"]
        for m in ("greedy", "seeded"):
            cmp(f"fork of re-imported old export {m} == old fork _imp_fin", O["forks"]["_imp_fin"][m].get("result"), f2[m].get("result"))
    if N["import_new_imp_tpl"][0] == 200:
        f2 = forks(c, ["_new_imp_tpl"])["_new_imp_tpl"]
        cmp("fork of re-imported old template export greedy == old fork of TPL_prompt",
            O["forks"][O["tpls"][0]]["greedy"].get("result"), f2["greedy"].get("result"))
    # delete
    N["del_seeded"] = post(c, f"/v1/tasks/{ids['T_seeded']}/delete")
    N["del_tpl_noforce"] = post(c, "/v1/tasks/_imp_pth/delete")
    N["del_tpl_force"] = post(c, "/v1/tasks/_imp_pth/delete?force=true")
    N["get_deleted"] = c.get(f"/v1/tasks/{ids['T_seeded']}/get_result").status_code
    F.append(f"INFO delete T_seeded {N['del_seeded']}; tpl w/o force {N['del_tpl_noforce']}; force {N['del_tpl_force']}; get after delete {N['get_deleted']}")
    N["health_end"] = c.get("/health").json()
    F.append(f"INFO health end: {json.dumps(N['health_end'].get('task_store', N['health_end']))[:300]}")
    json.dump(N, open(f"{outd}/new.json", "w"), indent=1)
    open(f"{outd}/findings.txt", "w").write("\n".join(F) + "\n")
    print("\n".join(F))


def probe(url, outd):
    os.makedirs(outd, exist_ok=True)
    c = cl(url)
    P = {"health": c.get("/health").json(), "list": c.get("/v1/tasks/list?limit=1000").json()}
    P["models"] = [m["id"] for m in c.get("/v1/models").json()["data"]]
    P["get"] = {}
    for t in P["list"]["db_tasks"]:
        r = c.get(f"/v1/tasks/{t}/get_result")
        P["get"][t] = (r.status_code, (r.json().get("result") if r.status_code == 200 else r.text[:200]))
    P["fork"] = {}
    for t in [x for x in P["list"]["db_tasks"] if x.startswith("_")]:
        P["fork"][t] = run_and_wait(c, f"/v1/tasks/{t}/fork?tmp=true", {"prompt": P4, "max_tokens": 30, **G})
    json.dump(P, open(f"{outd}/probe.json", "w"), indent=1)
    print(json.dumps({"health": P["health"].get("status"), "n_db": len(P["list"]["db_tasks"]), "models": P["models"]}))
    for t, v in P["get"].items():
        print("GET", t, v[0], repr(v[1])[:80])
    for t, v in P["fork"].items():
        print("FORK", t, v.get("http", 200), repr(v.get("result", v.get("body")))[:80])


if __name__ == "__main__":
    cmd = sys.argv[1]
    {"old": old, "k9": k9, "new": new, "probe": probe}[cmd](*sys.argv[2:])
