import sys, json, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
def scenario(port, log):
    rng = random.Random(31337)
    words = "the of and 你好 世界 😀 naïve café lorem ipsum dolor sit amet 12345 ,.;: \n\n User: Assistant:".split(" ")
    def rt(n): return " ".join(rng.choice(words) for _ in range(n))
    def rec(name, v): log.write(json.dumps([name, v], ensure_ascii=False) + "\n"); log.flush()
    G = dict(temperature=0, max_tokens=40)
    S = lambda s: dict(temperature=1.0, top_p=0.9, top_k=0, seed=s, max_tokens=40)
    head = "User: You are a translator. " + rt(150) + "\n\nAssistant: OK.\n\n"
    r, t0 = task(port, "create", {"prompt": head, "max_tokens": 0}); rec("tpl-create", r)
    j = C.post(f"http://localhost:{port}/v1/tasks/{t0}/as_template").json(); tpl = j["task_id"]; rec("as_template", j["result"])
    qs = [rt(rng.randrange(1, 20)) for _ in range(6)]
    for i, q in enumerate(qs):
        r, _ = task(port, f"{tpl}/fork", {"prompt": "User: " + q + "\n\nAssistant:", **G}); rec(f"fork-g-{i}", r)
        r, _ = task(port, f"{tpl}/fork?tmp=true", {"prompt": "User: " + q + "\n\nAssistant:", **S(i)}); rec(f"fork-s-{i}", r)
        # same text as a fresh create (no template): should equal? not necessarily (template split tokenisation). compare across servers only
        r, _ = task(port, "tmp", {"prompt": head + "User: " + q + "\n\nAssistant:", **G}); rec(f"tmp-full-{i}", r)
        r, _ = task(port, "create", {"prompt": head + "User: " + q + "\n\nAssistant:", **S(i)}); rec(f"create-full-s-{i}", r)
    # fork without prompt, fork with no seed (template's stream)
    r, _ = task(port, f"{tpl}/fork", {"max_tokens": 30, "temperature": 0}); rec("fork-noprompt", r)
    # OpenAI with template
    for i in range(3):
        rec(f"oa-tpl-chat-{i}", chat(port, [{"role": "user", "content": qs[i]}], model=f"rwkv-7:{tpl}", reasoning_effort="none"))
        rec(f"oa-tpl-comp-{i}", comp(port, "User: " + qs[i], model=f"rwkv-7:{tpl}", temperature=1, seed=3))
    # continue chains
    r, tid = task(port, "create", {"prompt": "Once upon a time " + rt(40), **G}); rec("cont-0", r)
    for k in range(4):
        r, _ = task(port, f"{tid}/continue", {"prompt": rng.choice(["\n\n", " and", "User: " + rt(5), "", "你"]) or None, "max_tokens": 20}); rec(f"cont-{k+1}", r)
    r, f1 = task(port, f"{tid}/fork", {"prompt": " Then", **S(77)}); rec("fork-of-cont", r)
    r, _ = task(port, f"{f1}/fork", {"prompt": " Again", **G}); rec("fork-of-fork", r)
    # continue with seeded, then same again via create of equivalent text? compare across servers
    r, t2 = task(port, "create", {"prompt": "Poem: " + rt(60), "max_tokens": 0}); rec("c0", r)
    for k in range(3):
        r, _ = task(port, f"{t2}/continue", {"prompt": rt(10), **S(k)}); rec(f"c0-cont-{k}", r)
    # template from a generated task (state_decoded)
    r, t3 = task(port, "create", {"prompt": "Generated base " + rt(30), **G}); rec("gb", r)
    j = C.post(f"http://localhost:{port}/v1/tasks/{t3}/as_template").json(); tpl2 = j["task_id"]
    for i in range(3):
        r, _ = task(port, f"{tpl2}/fork", {"prompt": " more " + qs[i], **G}); rec(f"tpl2-fork-{i}", r)
    # export/import state as _name
    blob = C.get(f"http://localhost:{port}/v1/tasks/{tpl}/export_state").content
    j = C.post(f"http://localhost:{port}/v1/tasks/import_state?name=_imp{port}", content=blob); rec("import", j.status_code)
    for i in range(3):
        r, _ = task(port, f"_imp{port}/fork", {"prompt": "User: " + qs[i] + "\n\nAssistant:", **G}); rec(f"imp-fork-{i}", r)
        rec(f"imp-chat-{i}", chat(port, [{"role": "user", "content": qs[i]}], model=f"rwkv-7:_imp{port}", reasoning_effort="none"))
    # fim
    for i in range(3):
        r, _ = task(port, "fim", {"prefix": "def f(x):\n    " + rt(i*10), "suffix": "\n    return y\n", **G}); rec(f"fim-{i}", r)
    # token id prompts via task api with prefix structure
    ids = [rng.randrange(1, 60000) for _ in range(150)]
    for k in [150, 40, 64, 100, 150, 33]:
        r, _ = task(port, "tmp", {"prompt": ids[:k], **S(k)}); rec(f"ids-{k}", r)
    # penalties via task api
    for pk in [dict(presence_penalty=0.0), dict(repetition_penalty=1.5), dict(presence_penalty=3.0, penalty_decay=0.5)]:
        r, _ = task(port, "tmp", {"prompt": head + "zz", **G, **pk}); rec(f"pen-{pk}", r)
        r, _ = task(port, f"{tpl}/fork", {"prompt": "zz", **G, **pk}); rec(f"pen-fork-{pk}", r)
if __name__ == "__main__":
    port = int(sys.argv[1])
    with open(f"/tmp/qa_cache/s3_{port}.jsonl", "w") as f:
        scenario(port, f)
    print(port, "done", health(port))
