import sys, os
sys.path.insert(0, "/work/main")
os.environ.setdefault("RWKV_TASK_DB_PATH", "/tmp/qa_samp/tasks.db")
import torch
from server import RWKV070ModelLoader
for dt in ("fp32", "bf16"):
    ld = RWKV070ModelLoader("/tmp/qa_samp/m.pth", device="cpu", dtype=dt)
    st = ld.model.new_state(1)
    with torch.no_grad():
        lg = ld.model.prefill([ld.encode("User: hello there\n\nAssistant:")], st)[0]
    top = torch.topk(lg.float(), 50).values
    print(dt, lg.dtype, "distinct of top50:", len(set(top.tolist())), "top1 tied:", int((lg == lg.max()).sum()),
          "top5", top[:5].tolist())
