import sys, json, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
from concurrent.futures import ThreadPoolExecutor
port = int(sys.argv[1]); tag = sys.argv[2]
rng = random.Random(4242)
out = []
def rec(n, v): out.append((n, v))
S = lambda s: dict(temperature=1.0, top_p=1.0, top_k=0, seed=s, max_tokens=40)
ids = [rng.randrange(1, 60000) for _ in range(1400)]
for k in [700, 513, 1025, 1400, 511, 512, 544, 545, 1024, 1023, 1399, 1100]:
    rec(f"long-{k}", comp(port, ids[:k], **S(k)))
# a prompt that is exactly the budget + 1 etc, then extension
pool = ThreadPoolExecutor(6)
fs = [pool.submit(comp, port, ids[:k] + [7, 8, 9][:j], **S(k + j)) for j, k in enumerate([600, 900, 1300, 600, 900, 1300])]
for i, f in enumerate(fs): rec(f"conc-long-{i}", f.result())
# long chat turns
words = "alpha beta gamma 你好 😀 data\n".split(" ")
msgs = [{"role": "system", "content": " ".join(rng.choice(words) for _ in range(500))}]
for t in range(5):
    msgs.append({"role": "user", "content": " ".join(rng.choice(words) for _ in range(rng.randrange(50, 300)))})
    r = chat(port, msgs, reasoning_effort="none", max_tokens=40, temperature=1.0, seed=t)
    rec(f"longchat-{t}", r); msgs.append({"role": "assistant", "content": r[0] or "x"})
json.dump(out, open(f"/tmp/qa_cache/s10_{port}_{tag}.json", "w"), ensure_ascii=False)
