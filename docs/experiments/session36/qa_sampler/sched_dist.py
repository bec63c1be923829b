import sys, time, os
sys.path.insert(0, "/tmp/qa_samp"); sys.path.insert(0, "/work/main")
os.environ.setdefault("RWKV_TASK_DB_PATH", "/tmp/qa_samp/tasks.db")
import numpy as np, torch
from ref import ref_dist, chi2_test
from server import RWKV070ModelLoader, DynamicScheduler

loader = RWKV070ModelLoader("/tmp/qa_samp/m.pth", device="cpu")
prompt = "User: tell me something\n\nAssistant:"
with torch.no_grad():
    st = loader.model.new_state(1)
    logits = loader.model.prefill([loader.encode(prompt)], st)[0].float().numpy()
print("logit spread: max", logits.max(), "std", logits.std())
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
for T, k, p, seeds in [(1.0, 30, 0.9, "seq"), (0.5, 0, 0.8, "seq"), (1.0, 10, 1.0, None)]:
    t0 = time.time()
    s = DynamicScheduler(loader, max_batch_size=256, buffer_size=4)
    tasks = [s.new_task(prompt, max_tokens=1, temperature=T, top_k=k, top_p=p,
                        seed=(i if seeds == "seq" else None)) for i in range(N)]
    s.run()
    first = np.array([t.output[0] if t.output else 0 for t in tasks])
    c = np.bincount(first, minlength=logits.size)
    ref = ref_dist(logits, T, k, p)
    stat, df, pv, outside, tv = chi2_test(c, ref)
    print(f"T={T} k={k} p={p} seeds={seeds} N={N}: chi2={stat:.1f} df={df} p={pv:.3g} outside={outside} "
          f"support={(ref>0).sum()} TV={tv:.3f} ({time.time()-t0:.0f}s)")
