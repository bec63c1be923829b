import sys, json, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
from concurrent.futures import ThreadPoolExecutor
def scenario(port, log, tag):
    rng = random.Random(99)
    words = "the of and 你好 世界 😀 naïve café Straße lorem ipsum dolor sit amet 12345 ,.;: data model state cache".split(" ")
    def rt(n): return " ".join(rng.choice(words) for _ in range(n))
    def rec(name, v): log.write(json.dumps([name, v], ensure_ascii=False) + "\n"); log.flush()
    SYS = "You are a careful assistant. " + rt(300)
    pool = ThreadPoolExecutor(16)
    for rnd in range(3):
        qs = [rt(rng.randrange(2, 30)) for _ in range(12)]
        seeds = [rng.randrange(1000) for _ in range(12)]
        futs = []
        for i, q in enumerate(qs):
            msgs = [{"role": "system", "content": SYS}, {"role": "user", "content": q}]
            if i % 2: futs.append(pool.submit(chat, port, msgs, reasoning_effort="none", max_tokens=32))
            else: futs.append(pool.submit(chat, port, msgs, temperature=1.0, top_p=0.8, seed=seeds[i], max_tokens=32))
        for i, f in enumerate(futs): rec(f"conc-{rnd}-{i}", f.result())
        # same questions again sequentially (whole-prompt hits / no concurrency)
        for i, q in enumerate(qs[:4]):
            msgs = [{"role": "system", "content": SYS}, {"role": "user", "content": q}]
            rec(f"seq-{rnd}-{i}", chat(port, msgs, reasoning_effort="none", max_tokens=32))
    # concurrent completions that are prefixes of each other
    P = rt(200)
    cuts = sorted(rng.sample(range(10, len(P)), 10))
    futs = [pool.submit(comp, port, P[:k], max_tokens=24) for k in cuts]
    for k, f in zip(cuts, futs): rec(f"conc-comp-{k}", f.result())
    for k in cuts[::3]: rec(f"seq-comp-{k}", comp(port, P[:k], max_tokens=24))
    rec("health", {k: v for k, v in health(port).items() if k in ("hits", "misses", "inserts", "evictions")} if tag=="x" else None)
if __name__ == "__main__":
    port = int(sys.argv[1]); tag = sys.argv[2]
    with open(f"/tmp/qa_cache/s2_{port}_{tag}.jsonl", "w") as f:
        scenario(port, f, tag)
    print(port, tag, "done", health(port))
