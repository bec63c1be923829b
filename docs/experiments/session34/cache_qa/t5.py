exec(open(__file__.rsplit("/", 1)[0] + "/qa.py").read())  # (ran as /tmp/qa34c/qa.py)
import concurrent.futures as cf
S = {"temperature": 1.0, "top_p": 0.9, "top_k": 50}
SYS = "Shared long system prompt for concurrency. " * 30
convs = {name: [[{"role": "system", "content": SYS}] for _ in range(6)] for name in ("A", "B")}
for t in range(7):
    res = {}
    for name, c in (("A", ca), ("B", cb)):
        bodies = []
        for k in range(6):
            convs[name][k].append({"role": "user", "content": f"conv {k} turn {t}: say something"})
            bodies.append({"model": "rwkv-7", "messages": list(convs[name][k]), "max_tokens": 20 + 5 * k, "seed": 1000 * k + t, "reasoning_effort": "none", **S} if k % 3 else
                          {"model": "rwkv-7", "messages": list(convs[name][k]), "max_tokens": 20, "temperature": 0, "reasoning_effort": "none"})
        with cf.ThreadPoolExecutor(6) as ex:
            res[name] = list(ex.map(lambda b: c.post("/v1/chat/completions", json=b).json(), bodies))
        for k in range(6):
            convs[name][k].append({"role": "assistant", "content": res[name][k]["choices"][0]["message"]["content"] or ""})
    for k in range(6):
        cmp(f"conc-mt turn{t} conv{k}", res["A"][k], res["B"][k], bodies[k])
print(stats); print("\n".join(findings))
