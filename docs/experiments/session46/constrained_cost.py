"""What a constrained row (response_format) costs a batch on the CPU: 8 rows decoding 64
tokens each, none or some of them under the any-JSON-object grammar, through the real
scheduler on the tiny random model (CPU, fp32). Prints the median wall time of 5 runs a case
(with its tokens: a constrained row ends early once its JSON is complete) and the grammar's
own host time a step (``apply``: the last step's tokens read, the masks made and uploaded;
``record``; for all of the pulse's constrained rows), from a timing wrapper around Guide's
methods.

    OMP_NUM_THREADS=2 PYTHONPATH=. uv run python docs/experiments/session46/constrained_cost.py
"""
import time

from server.model.loader import RWKV070ModelLoader
from server.model.random import main as make_random
from server.scheduler import DynamicScheduler
from server.scheduler import guide as guide_mod
from server.task.constraint import Constraint, json_grammar

spent = {"apply": 0.0, "record": 0.0, "steps": 0}
for name in ("apply", "record"):
    real = getattr(guide_mod.Guide, name)

    def timed(self, *a, _real=real, _name=name):
        t0 = time.perf_counter()
        out = _real(self, *a)
        spent[_name] += time.perf_counter() - t0
        spent["steps"] += _name == "apply"
        return out
    setattr(guide_mod.Guide, name, timed)


def run(loader, grammar, constrained: int) -> tuple[float, int]:
    sched = DynamicScheduler(loader, max_batch_size=8, buffer_size=16)
    tasks = []
    for i in range(8):
        t = sched.new_task(loader.encode(f"User: item {i}\n\nAssistant:"), max_tokens=64,
                           temperature=1.0, top_k=0, top_p=1.0, seed=i)
        if i < constrained:
            t.constraint = Constraint(grammar, loader.tokenizer)
        tasks.append(t)
    t0 = time.perf_counter()
    sched.run()
    return time.perf_counter() - t0, sum(len(t.output) for t in tasks)


path = "/tmp/constrained_cost_tiny.pth"
make_random([path, "--preset", "tiny", "--seed", "1", "--force"])
loader = RWKV070ModelLoader(path, device="cpu")
grammar = json_grammar(None)
run(loader, grammar, 1)  # warm: the grammar engine's vocabulary, first passes
print("| constrained rows of 8 | wall s (median of 5) | tokens | tok/s | grammar host ms a "
      "step |")
print("|---|---|---|---|---|")
for n in (0, 1, 8):
    spent.update(apply=0.0, record=0.0, steps=0)
    runs = sorted(run(loader, grammar, n) for _ in range(5))
    wall, tokens = runs[2]
    per = (spent["apply"] + spent["record"]) / spent["steps"] * 1e3 if spent["steps"] else 0
    print(f"| {n} | {wall:.3f} | {tokens} | {tokens / wall:.0f} | {per:.3f} |")
