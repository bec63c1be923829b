import sys, os
sys.path.insert(0, "/work/main")
os.environ.setdefault("RWKV_TASK_DB_PATH", "/tmp/qa_samp/tasks.db")
from server import RWKV070ModelLoader, DynamicScheduler
ld = RWKV070ModelLoader("/tmp/qa_samp/m.pth", device="cpu", dtype="bf16")
A = dict(max_tokens=30, temperature=1.0, top_k=50, top_p=1.0, presence_penalty=0.0, penalty_decay=1.0)
prompt = "User: hello there\n\nAssistant:"
def run(neigh_k):
    s = DynamicScheduler(ld, max_batch_size=8, buffer_size=8)
    ts = [s.new_task(prompt, seed=sd, **A) for sd in range(1, 5)]
    if neigh_k is not None:
        s.new_task("User: other\n\nAssistant:", max_tokens=40, temperature=1.0, top_k=neigh_k, top_p=1.0, seed=77)
    s.run()
    return [t.output for t in ts]
base = run(None)
for nk in (50, 500):
    o = run(nk)
    print("neighbour top_k", nk, "tasks changed:", sum(a != b for a, b in zip(base, o)), "/ 4",
          "first diff positions:", [next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None) for a, b in zip(base, o)])
