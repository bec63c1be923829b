# In-process: force the model to always prefer "User" (24281), to show where the engine ends a reply.
import sys; sys.path.insert(0, "/work/main")
import os; os.environ["RWKV_TASK_DB_PATH"] = ":memory:"
import torch
from server.api.lifecycle import demo_state_dict
from server.model.loader import RWKV070ModelLoader
from server import DynamicScheduler
from server.api.chat import fim_prompt
sd = demo_state_dict("tiny", torch.device("cpu"))
print([k for k in sd if not k.startswith("blocks")])
C = sd["head.weight"].shape[1]
b = torch.randn(C, dtype=torch.float32)
sd["ln_out.weight"] = torch.zeros_like(sd["ln_out.weight"])
sd["ln_out.bias"] = b.to(sd["ln_out.bias"].dtype)
W = torch.zeros_like(sd["head.weight"]); W[24281] = (b / b.norm()).to(W.dtype); sd["head.weight"] = W
loader = RWKV070ModelLoader("rwkv7-demo-tiny.pth", "/work/main/eof_v20230424.txt", state_dict=sd, device="cpu")
sch = DynamicScheduler(loader, max_batch_size=4, buffer_size=8)
prompts = {"plain 'x = 1\\n'": "x = 1\n", "plain 'x = 1\\n\\n'": "x = 1\n\n",
           "fim prefix 'class A:\\n    pass\\n\\n'": fim_prompt("class A:\n    pass\n\n", "\nprint(u)\n")}
ts = {k: sch.new_task(p, max_tokens=5, temperature=0) for k, p in prompts.items()}
sch.run()
for k, t in ts.items():
    toks = t.round_tokens(); print(k, "last prompt token", loader.encode(prompts[k])[-1], "generated", toks, repr(loader.decode(toks)), t.finish_reason)
