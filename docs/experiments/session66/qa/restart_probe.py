"""Templates across a restart with the same SQLite DB (item 6 of session 66's QA brief).
    phase 1 (server up):  uv run python docs/experiments/session66/qa/restart_probe.py URL before
    restart the server with the same RWKV_TASK_DB_PATH
    phase 2:              uv run python docs/experiments/session66/qa/restart_probe.py URL after
Phase 1 makes a template `_qa_restart` (create max_tokens=0 + as_template?name=), records greedy
fork outputs of every `_qa*` template in /tmp/qa66/restart.json; phase 2 compares.
"""
import json, sys, time
import httpx

URL, PHASE = sys.argv[1], sys.argv[2]
c = httpx.Client(base_url=URL, timeout=120)
REC = "/tmp/qa66/restart.json"


def wait(tid):
    for _ in range(600):
        g = c.get(f"/v1/tasks/{tid}/get_result").json()
        if g["finished"]:
            return g["result"]
        time.sleep(0.1)


def greedy(tpl):
    r = c.post(f"/v1/tasks/{tpl}/fork?tmp=true", json={"prompt": "User: go\n\nAssistant:", "max_tokens": 16,
                                                        "temperature": 0})
    if r.status_code != 200:
        return f"HTTP {r.status_code} {r.text[:100]}"
    return wait(r.json()["task_id"])


def chat(tpl):
    r = c.post("/v1/chat/completions", json={"model": f"rwkv-7:{tpl}", "max_tokens": 10, "temperature": 0,
               "reasoning_effort": "none", "messages": [{"role": "user", "content": "hi"}]})
    # (a list, as JSON gives it back from the record: a tuple compared unequal)
    return [r.status_code, r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else r.text[:100]]


if PHASE == "before":
    r = c.post("/v1/tasks/create", json={"prompt": "User: You are a pirate.\n\nAssistant: Arr.\n\n", "max_tokens": 0})
    tid = r.json()["task_id"]
    print("create max_tokens=0:", r.status_code, r.json()["finished"])
    r = c.post(f"/v1/tasks/{tid}/as_template?name=qa_restart")
    print("as_template:", r.status_code, r.text[:120])
    r = c.post(f"/v1/tasks/{tid}/as_template")
    print("as_template unnamed:", r.status_code, r.text[:120])
    # a persistent task with output, to compare get_result after the restart
    r = c.post("/v1/tasks/create", json={"prompt": "abc", "max_tokens": 10, "temperature": 0})
    ptid = r.json()["task_id"]; pres = wait(ptid)
    time.sleep(1)
ids = [m["id"] for m in c.get("/v1/models").json()["data"]]
tpls = sorted(i.split(":", 1)[1] for i in ids if ":" in i)
out = {t: [greedy(t), chat(t)] for t in tpls}
if PHASE == "before":
    out["__persistent"] = [ptid, pres]
    json.dump(out, open(REC, "w"))
    print("templates:", tpls)
else:
    old = json.load(open(REC))
    ptid, pres = old.pop("__persistent")
    g = c.get(f"/v1/tasks/{ptid}/get_result")
    print("persistent task after restart:", g.status_code, g.json().get("result") == pres if g.status_code == 200 else g.text)
    print("missing after restart:", sorted(set(old) - set(out)), " new:", sorted(set(out) - set(old)))
    for t in sorted(old):
        if t in out:
            print(f"{t:28s} fork equal={old[t][0] == out[t][0]} chat equal={old[t][1] == out[t][1]}")
            if old[t] != out[t]:
                print("    before", old[t], "\n    after ", out[t])
    print("health:", c.get("/health").json()["status"])
