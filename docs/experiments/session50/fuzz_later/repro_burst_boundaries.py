"""GPU emulation (a pass of >= 4 rows has other WKV bits; pass_keeps_bits = rows < 4): K chats
(one system prompt) send their 2nd turn together; then each chat's 3rd turn is sent alone.
Counts what the cache kept (exact?), the prefill calls of the burst, the tokens the 3rd turns
had to prefill, and whether each 3rd turn's output/state equals a cache-off run's.
Usage: repro_burst_boundaries.py [K] [emulate 0/1] [lie 0/1: pass_keeps_bits always True, the guard off]"""
import sys
sys.path.insert(0, "/tmp/h1")
import torch
torch.set_num_threads(1)
from server.model.loader import RWKV070ModelLoader
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task

K = int(sys.argv[1]) if len(sys.argv) > 1 else 8
EMU = int(sys.argv[2]) if len(sys.argv) > 2 else 1
L = RWKV070ModelLoader("/tmp/h1/report/tiny.pth", device="cpu"); M = L.model
real = M.wkv_chunk
def nudged(S, *a, **kw):
    y = real(S, *a, **kw)
    if EMU and S.shape[0] >= 4:
        S.mul_(1 + 2 ** -20)
    return y
M.wkv_chunk = nudged
LIE = int(sys.argv[3]) if len(sys.argv) > 3 else 0
M.pass_keeps_bits = (lambda rows: rows < 4 or bool(LIE)) if EMU else (lambda rows: True)
TT = 261
sysp = [300 + (i * 7) % 100 for i in range(70)]
def msg(c, t, n): return [20000 + (c * 31 + t * 7 + i) % 100 for i in range(n)]
def render(turns): 
    out = list(sysp)
    for t in turns: out += [TT] + t
    return out + [TT, 5585, 41]
convs = [[msg(c, 0, 40), msg(c, 1, 50), msg(c, 2, 30 + c)] for c in range(K)]  # user, assistant, user
cache = PrefixCache(256 << 20)
s = DynamicScheduler(L, max_batch_size=16, buffer_size=4, prefix_cache=cache, prefill_chunk=4096)
pf = s.prefiller
# turn 1 of each chat, alone (warm the cache as a sequential history would)
for c in range(K):
    t = Task(render(convs[c][:1]), max_tokens=0); t.cache_origin = ""; s.add_task(t); s.run()
calls0, tok0 = pf.prefill_calls, pf.prefilled_tokens
burst = []
for c in range(K):  # turn 2 together
    t = Task(render(convs[c]), max_tokens=1, temperature=0.0); t.cache_origin = ""; s.add_task(t); burst.append(t)
s.run()
print(f"K={K} emulate={EMU}: burst prefill_calls={pf.prefill_calls - calls0} tokens={pf.prefilled_tokens - tok0} "
      f"later_tokens={pf.later_tokens} state_decoded={sum(t.state_decoded for t in burst)}")
def lone(tokens):
    st = M.new_state(1); M.prefill([list(tokens)], st, logits=False); return st
inexact = sum(not torch.equal(lone(e.tokens).wkv, e.state.wkv) for e in cache._lru.values())
print(f"  entries={len(cache._lru)} inexact={inexact}")
# turn 3 of each chat alone: prompt = turn 2's prompt + reply + a new message
tok_before, diffs = pf.prefilled_tokens, 0
for c in range(K):
    p = render(convs[c] + [msg(c, 3, 20), msg(c, 4, 12)])
    a = Task(list(p), max_tokens=4, temperature=1.0, top_p=0.9, top_k=0, seed=c); a.cache_origin = ""
    s.add_task(a); s.run()
    plain = DynamicScheduler(L, max_batch_size=16, buffer_size=4, prefill_chunk=4096)
    b = Task(list(p), max_tokens=4, temperature=1.0, top_p=0.9, top_k=0, seed=c); b.cache_origin = ""
    plain.add_task(b); plain.run()
    diffs += a.output != b.output or not torch.equal(a.state.wkv, b.state.wkv)
print(f"  3rd turns alone: tokens prefilled={pf.prefilled_tokens - tok_before} "
      f"(of {sum(len(render(convs[c] + [msg(c,3,20), msg(c,4,12)])) for c in range(K))}) differ_from_cache_off={diffs}")
