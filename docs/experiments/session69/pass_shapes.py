"""Session 69: the batched prefill passes a served load makes (CPU, the tiny demo with CUDA's
pass settings): rows, padded width, rows x width against the tokens they carry.

The tiny model on the CPU, but with what a CUDA server uses: a step's budget of 4,096 tokens
(``prefill_chunk``), the model's pass chunk of 1,024 tokens, ``prefill_tokens`` 16,384, and
``takes_token_loop`` as for the 2.9B shape on an H100 (40 heads, 132 SMs: a pass of four rows or
more takes the token loop, so its states are not kept). The load is ``server.bench memory``'s
(256 of the stress bench's prompts, 67-691 tokens, 64 tokens each).

    PYTHONPATH=. uv run python docs/experiments/session69/pass_shapes.py [--prefill-tokens N]
        [--dump docs/experiments/session69/load_calls.json]
"""
import argparse
import json
import tempfile
from pathlib import Path

from server.api.lifecycle import build_runtime, close_runtime
from server.bench.memory import run_load
from server.config import Settings
from server.model.forward import RWKV7



def cap_only(widths, cap):
    """The grouping before session 69: as many rows a pass as the longest row's width allows."""
    per = max(1, cap // widths[0])
    return [(a, min(a + per, len(widths))) for a in range(0, len(widths), per)]


p = argparse.ArgumentParser()
p.add_argument("--prefill-tokens", type=int, default=16384)
p.add_argument("--load", type=int, default=256)
p.add_argument("--cap-only", action="store_true",
               help="group a pass's rows as before session 69 (by prefill_tokens alone)")
p.add_argument("--dump", help="write each prefill call's prompt lengths (JSON) here")
args = p.parse_args()

passes, calls = [], []
orig, orig_prefill = RWKV7._forward_padded, RWKV7.prefill


def prefill(self, token_lists, state, *a, **k):
    calls.append([len(t) for t in token_lists])
    return orig_prefill(self, token_lists, state, *a, **k)


def recorded(self, parts, state, mid=(), mid_state=None):
    passes.append((len(parts), self._pass_width(max(len(q) for q in parts)),
                   sum(len(q) for q in parts)))
    return orig(self, parts, state, mid, mid_state)


RWKV7._forward_padded = recorded
RWKV7.prefill = prefill
if args.cap_only:
    import server.model.forward as fw

    fw.plan_passes = cap_only
RWKV7.takes_token_loop = lambda self, rows, T: rows * 40 > 132
with tempfile.TemporaryDirectory() as tmp:
    s = Settings(demo="tiny", prefill_chunk=4096, max_batch_size=256,
                 prefill_tokens=args.prefill_tokens, task_db_path=str(Path(tmp) / "t.db"))
    rt = build_runtime(s)
    try:
        rt.loader.model.prefill_chunk = 1024
        passes.clear()
        calls.clear()
        made = run_load(rt.scheduler, args.load, 64)
    finally:
        close_runtime(rt)
if args.dump:
    Path(args.dump).write_text(json.dumps(calls))
print(f"{len(calls)} prefill calls, {sum(map(len, calls))} rows, {sum(map(sum, calls))} tokens")
big = [q for q in passes if q[0] > 3]
print(f"{len(passes)} passes ({len(big)} of 4+ rows), {made} tokens made")
print("rows x width = padded tokens (real tokens), the passes of 4+ rows by padded size:")
for rows, w, real in sorted(big, key=lambda q: -q[0] * q[1])[:15]:
    print(f"  {rows:4d} x {w:5d} = {rows * w:6d} ({real:6d}, {real / (rows * w):.0%})")
pad = sum(r * w for r, w, _ in big)
print(f"all passes of 4+ rows: {pad} padded tokens, {sum(q[2] for q in big)} real")
