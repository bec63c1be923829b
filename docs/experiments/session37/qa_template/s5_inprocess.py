"""In-process scheduler (as test_prefix_cache_exact): several forks of a template admitted
together (shared prefixes -> in-flight branch points, leader/waiter), turn boundaries (later
jobs, exported mid points), identical prompts, budget cuts; cache vs no cache, bits compared.
Run: cd /work/main && OMP_NUM_THREADS=1 uv run python /tmp/qa_tpl/s5_inprocess.py"""
import os
import sys

REPO = os.environ.get("REPO", "/work/main")
sys.path[:0] = [REPO, REPO + "/test"]
import torch  # noqa

torch.set_num_threads(1)
from server.api.prefix import _start_all  # noqa
from server.api.task_service import _fork  # noqa
from server.model.loader import RWKV070ModelLoader  # noqa
from server.scheduler import DynamicScheduler  # noqa
from server.scheduler.prefix_cache import PrefixCache  # noqa
from server.task.task import Task  # noqa

loader = RWKV070ModelLoader("/tmp/qa_tpl/tiny.pth", device="cpu")
TURN = 261


def rnd(n, seed):
    return torch.randint(300, 60000, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def same(a, b):
    return torch.equal(a.wkv, b.wkv) and torch.equal(a.shift, b.shift)


def scenario(cache, L, chunk, batches, seeded=True):
    sched = DynamicScheduler(loader, max_batch_size=8, buffer_size=4, prefix_cache=cache,
                             prefill_chunk=chunk)
    src = Task(rnd(L, L), max_tokens=0)
    src.cache_origin = ""
    sched.add_task(src)
    sched.run()
    tpl = _fork(src, "_TMPL_x")
    out = []
    for batch in batches:
        tasks = []
        for i, prompt in enumerate(batch):
            kw = dict(max_tokens=5, temperature=1.0, top_p=1.0, top_k=0, seed=i + 1) if seeded \
                else dict(max_tokens=5, temperature=0.0)
            if prompt == "ZERO":  # a zero-origin task with the template's tokens + a prompt
                t = Task(list(src.history) + list(src.pending) + batch[0], **kw)
                t.cache_origin = ""
            elif os.environ.get("NOTPL"):
                t = Task(list(prompt), **kw)
                t.cache_origin = ""
            else:
                t = Task(list(prompt), **kw)
                t.cache_origin = _start_all(tpl, [t])
            t.cache_finish = False
            tasks.append(t)
            sched.add_task(t)
        sched.run()
        out += tasks
    return out, sched


base = rnd(120, 7)
with_turn = list(base)
with_turn[20] = TURN
with_turn[70] = TURN
batches = [
    [base, base[:60] + rnd(50, 8), base[:60] + rnd(50, 9), base],       # together
    [base + rnd(20, 10), base[:90] + rnd(40, 11)],
    [with_turn, with_turn + rnd(30, 12), "ZERO"],
    [with_turn + rnd(30, 12) + [TURN] + rnd(40, 13)],                     # next turn
    [base[:33], base[:32], base[:1], base[:2]],
]
bad = 0
for L in [int(x) for x in os.environ.get('LS', '1,2,32,33,45,64,77').split(',')]:
    for chunk in (4096, 32, 48, 64):
        for seeded in (True, False):
            plain, _ = scenario(None, L, chunk, batches, seeded)
            cached, sched = scenario(PrefixCache(64 << 20), L, chunk, batches, seeded)
            diffs = [i for i, (a, b) in enumerate(zip(cached, plain))
                     if a.output != b.output or not same(a.state, b.state)]
            st = sched.prefix_cache.stats()
            if diffs:
                bad += 1
                print(f"DIFF L={L} chunk={chunk} seeded={seeded} tasks={diffs} "
                      f"out={[cached[i].output == plain[i].output for i in diffs]}", flush=True)
            print(f"L={L} chunk={chunk} seeded={seeded} hits={st['hits']} "
                  f"saved={st['tokens_saved']} later={sched.prefiller.later_tokens}", flush=True)
print("scenarios differing:", bad)
