import sys, json, random, httpx
port = int(sys.argv[1]); C = httpx.Client(timeout=600); U = f"http://localhost:{port}"
def comp(**b):
    j = C.post(U + "/v1/completions", json={"model": "rwkv-7", **b}).json(); return j["choices"][0]["text"]
res = {}
# R1: max_tokens 0 then the same 33-token prompt
rng = random.Random(9003); n = rng.choice([33, 65]); P = [rng.randrange(1, 60000) for _ in range(n)]; print(len(P), P)
comp(prompt=P, max_tokens=0)
res["R1"] = comp(prompt=P, max_tokens=150, temperature=1.0, top_p=1.0, seed=3)
# R2: two 74-token prompts sharing 64 tokens, then a 65-token prompt with that prefix
rng = random.Random(12016)
X = [rng.randrange(1, 60000) for _ in range(64)]
R = X + [rng.randrange(1, 60000) for _ in range(10)]; A = X + [rng.randrange(1, 60000) for _ in range(10)]; B = X + [rng.randrange(1, 60000)]
comp(prompt=R, max_tokens=5, temperature=0); comp(prompt=A, max_tokens=5, temperature=0)
res["R2"] = comp(prompt=B, max_tokens=150, temperature=1.0, top_p=1.0, seed=16)
# R3: template fork after the same full text was sent fresh
import time
def task(path, body):
    tid = C.post(U + "/v1/tasks/" + path, json=body).json()["task_id"]
    while not (g := C.get(f"{U}/v1/tasks/{tid}/get_result").json())["finished"]: time.sleep(0.05)
    return g["result"], tid
v = 15
head = f"User: You are poet number {v}. Write about rivers, with care and feeling.\n\nAssistant: OK.\n\n"
q = f"User: a poem about snow {v}\n\nAssistant:"
_, t0 = task("create", {"prompt": head, "max_tokens": 0})
tpl = C.post(f"{U}/v1/tasks/{t0}/as_template").json()["task_id"]
samp = {"max_tokens": 150, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "seed": v}
res["R3_fork_before"] = task(f"{tpl}/fork?tmp=true", {"prompt": q, **samp})[0]
res["R3_fresh"] = task("tmp", {"prompt": head + q, **samp})[0]
res["R3_fork_after"] = task(f"{tpl}/fork?tmp=true", {"prompt": q, **samp})[0]
json.dump(res, open(f"/tmp/qa_cache/repro_{port}.json", "w"), ensure_ascii=False, indent=0)
