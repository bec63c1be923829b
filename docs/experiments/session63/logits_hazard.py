"""Session 63's review: can one decode graph's replay overwrite another's borrowed logits?

Every engine on a model shares the model's decode graphs' private pool. A graph captured after
another may be given, for its logits (kept alive after the capture), blocks the first one's
capture freed (its working memory), which that graph's every replay writes. The scheduler reads
its logits after the replay (``decode(..., borrow=True)``); a second scheduler's replay landing
in between (its own thread, the same default stream) would change them. This replays graph B,
keeps its logits, replays graph A and checks B's logits: prints whether they changed and where
B's logits lie against the pool's blocks. Not run yet (no device time left in session 63).

    python3 docs/experiments/session63/logits_hazard.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "test")]


def main() -> None:
    import torch

    from model_cases import make_case
    from server.model.forward import RWKV7

    case = make_case("c512", with_reference=False)
    changed = 0
    for rows_a, rows_b in ((2, 4), (4, 2), (8, 8), (16, 32), (32, 16)):
        m = RWKV7(case.sd, case.cfg, device="cuda")
        a, b = m.new_state(rows_a), m.new_state(rows_b)
        ta = torch.arange(rows_a, device="cuda")
        tb = torch.arange(rows_b, device="cuda") + 5
        m.decode(ta, a, borrow=True)  # graph A captured first
        m.decode(tb, b, borrow=True)  # then graph B, in the same pool
        keep = m.decode(tb, b, borrow=True)  # B's output buffer itself
        before = keep.clone()
        m.decode(ta, a, borrow=True)  # A's replay: does it write into B's logits?
        torch.cuda.synchronize()
        same = torch.equal(keep, before)
        changed += not same
        print(f"A {rows_a} rows captured first, B {rows_b}: B's borrowed logits "
              f"{'unchanged' if same else 'CHANGED'} by A's replay "
              f"(B's logits at {keep.data_ptr():#x}, {keep.numel() * 4 / 2**20:.2f} MiB)")
        del m, a, b, keep
    print(f"{changed} of 5 pairs changed")


if __name__ == "__main__":
    main()
