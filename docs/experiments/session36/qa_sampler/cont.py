import sys, os
sys.path.insert(0, "/tmp/qa_samp"); sys.path.insert(0, "/work/main")
os.environ.setdefault("RWKV_TASK_DB_PATH", "/tmp/qa_samp/tasks.db")
import numpy as np, torch
from exact import ref_token, u_of
from server import RWKV070ModelLoader, DynamicScheduler
ld = RWKV070ModelLoader("/tmp/qa_samp/m.pth", device="cpu")
m = ld.model
rounds = [("User: hi\n\nAssistant:", dict(max_tokens=12, temperature=1.2, top_k=0, top_p=1.0, presence_penalty=0.5, repetition_penalty=0.3, penalty_decay=0.9, seed=3)),
          ("\n\nUser: more\n\nAssistant:", dict(max_tokens=10, temperature=0.0, presence_penalty=1.0)),
          ("\n\nUser: again\n\nAssistant:", dict(max_tokens=10, temperature=1.0, top_k=40, top_p=0.8, seed=9)),
          (None, dict(max_tokens=8))]   # no seed: stream continues
s = DynamicScheduler(ld, max_batch_size=4, buffer_size=4)
# a noisy neighbour running meanwhile
nb = s.new_task("User: neighbour\n\nAssistant:", max_tokens=200, temperature=1.0, top_k=500, seed=1)
t = s.new_task(rounds[0][0], **rounds[0][1]); s.run()
outs = [list(t.output)]
for pr, kw in rounds[1:]:
    t.continue_gen(pr, **kw); s.add_task(t); s.run(); outs.append(list(t.output))
# replay
cur = dict(rounds[0][1]); st = m.new_state(1)
with torch.no_grad():
    logits = m.prefill([ld.encode(rounds[0][0])], st)[0].numpy()
    Pen = np.zeros(logits.size, np.float32); counter = 0; last = None
    for r, (pr, kw) in enumerate(rounds):
        if r:
            cur.update(kw)
            if "seed" in kw: counter = 0
            feed = [last] + (ld.encode(pr) if pr else [])
            logits = m.prefill([feed], st)[0].numpy() if len(feed) > 1 else m.decode(torch.tensor(feed), st)[0].numpy()
        got = []
        for c in range(cur["max_tokens"]):
            tk = ref_token(logits, Pen, cur["temperature"], cur["top_k"], cur["top_p"], u_of(cur["seed"], counter)); counter += 1
            Pen = (Pen * np.float32(cur["penalty_decay"])).astype(np.float32)
            Pen[tk] = np.float32(Pen[tk] + np.float32(cur["presence_penalty"] if Pen[tk] == 0 else cur["repetition_penalty"]))
            got.append(tk); last = tk
            if c + 1 < cur["max_tokens"]:
                logits = m.decode(torch.tensor([tk]), st)[0].numpy()
        print("round", r, "server", outs[r][:12], "\n        ref   ", got[:12], "equal", outs[r] == got)
