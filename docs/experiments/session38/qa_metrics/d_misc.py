from qa import *
from c_cache import step
import random, threading

def nmany():
    r, dt = chat([{"role": "user", "content": f"n test {random.random()}"}], n=3, max_tokens=9)
    j = r.json(); u = j["usage"]
    print("   n=3 usage", u, [ch["finish_reason"] for ch in j["choices"]])
    return dict(usage=u, prompt_x3=3 * u["prompt_tokens"], tasks=3)
step("chat n=3", nmany)

def nmany_compl():
    r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": [f"alpha {random.random()}", f"beta {random.random()}"], "n": 2, "max_tokens": 5})
    j = r.json(); u = j["usage"]; print("   2 prompts x n=2 usage", u)
    return dict(usage=u, tasks=4)
step("completions 2 prompts x n=2", nmany_compl)

def stopstr():
    res = []
    for s in ["e", "a", " "]:
        r, dt = chat([{"role": "user", "content": f"stop test {random.random()}"}], max_tokens=60, stop=[s])
        j = r.json(); res.append((j["usage"], j["choices"][0]["finish_reason"], repr(j["choices"][0]["message"]["content"][-10:])))
    for x in res: print("  ", x)
    return dict(completion_sum=sum(x[0]["completion_tokens"] for x in res), prompt_sum=sum(x[0]["prompt_tokens"] for x in res))
step("chat with stop strings", stopstr)

def stopped():
    p = f"User: write forever {random.random()}\n\nAssistant:"
    r = c.post("/v1/tasks/create", json={"prompt": p, "max_tokens": 5000}); tid = r.json()["task_id"]
    time.sleep(1.5)
    r2 = c.post(f"/v1/tasks/{tid}/stop"); print("   stop:", r2.status_code, r2.json())
    time.sleep(0.5)
    st = c.get(f"/v1/tasks/{tid}/status").json(); res = c.get(f"/v1/tasks/{tid}/get_result").json()
    print("   status", st, "result tokens (re-encoded)", ntok(res["result"]), "gen_time", res["gen_time"])
    return dict(prompt=ntok(p), generated_buf=st["generated_buf"])
step("Task API stopped task", stopped)

def tmp_stream():
    p = f"User: stream via tmp {random.random()}\n\nAssistant:"
    t0 = time.perf_counter(); first = None; n = 0
    with c.stream("POST", "/v1/tasks/tmp", json={"prompt": p, "max_tokens": 40, "stream": True}) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                if first is None: first = time.perf_counter() - t0
                n += 1
    print("   tmp stream events", n, "client ttft", first)
    return dict(prompt=ntok(p), generated=40)
step("Task API tmp stream", tmp_stream)

def stopped_queue():
    # a task stopped while still prefilling a long prompt (not generating yet)
    p = "word " * 3000
    r = c.post("/v1/tasks/create", json={"prompt": p, "max_tokens": 50}); tid = r.json()["task_id"]
    r2 = c.post(f"/v1/tasks/{tid}/stop"); print("   stop:", r2.status_code, r2.json())
    time.sleep(1)
    st = c.get(f"/v1/tasks/{tid}/status").json(); print("   status", st)
    return dict(prompt=ntok(p), generated_buf=st["generated_buf"])
step("Task API task stopped during prefill", stopped_queue)
