"""Which rows of a batched prefill go through the layers together.

A pass pads its rows to its longest (``RWKV7._pass_width``): every padded token costs a real
token's products, mixes and WKV steps, and its activations' memory. Grouping the rows only by
``prefill_tokens`` (rows x width per pass) put short rows beside a long one: in a served load
of 256 prompts of 67-691 tokens (``server.bench memory --load 256``'s), 19 % of the batched
passes' token slots were padding, the largest pass 7,296 slots for 4,076 tokens
(docs/experiments/session69/pass_shapes.py and its logs; session 62 measured an 11,264-slot pass
at that load's peak). The largest pass sets a served process's peak device memory (session 67).

``plan_passes`` splits the rows (longest first) into consecutive passes minimising padded
tokens plus a fixed cost a pass (``PASS_FIXED_TOKENS``: the weights read once, the launches),
each pass at most ``cap`` tokens (rows x its first row's width) unless one row is wider: a
shortest path over the rows (``best[e]``, the least cost of rows before ``e``), one numpy update
a row, ~1 ms of host time at 256 rows (a 2-core VM). The optimum over every split, so never
costlier, so counted, than the ``prefill_tokens``-only grouping (one of the splits it weighs).
"""

from __future__ import annotations

import numpy as np

PASS_FIXED_TOKENS = 256  # a pass's fixed cost in tokens: 2.9B on the H200, a 152-token pass
# took 5.4 ms and 4,096 tokens 18.3 us a token (docs/performance.md): ~2.6 ms, ~140 tokens, for
# a graphed single row; an eager pass of several rows launches ~400 kernels more


def plan_passes(widths: list[int], cap: int,
                fixed: int = PASS_FIXED_TOKENS) -> list[tuple[int, int]]:
    """``[start, end)`` ranges of rows, in order, one a pass. ``widths``: each row's padded
    width (at least 1), longest first; ``cap``: the tokens (rows x the pass's first width) a
    pass holds at most; a row wider than ``cap`` goes alone."""
    n = len(widths)
    if n == 0:
        return []
    if min(widths) < 1 or any(b > a for a, b in zip(widths, widths[1:])):
        raise ValueError("plan_passes needs widths of at least 1, longest first")
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    back = np.zeros(n + 1, dtype=np.int64)
    for j in range(n):  # a pass from row j to each end its cap allows
        end = min(n, j + max(1, cap // widths[j]))
        cost = best[j] + fixed + widths[j] * np.arange(1, end - j + 1, dtype=np.float64)
        better = cost < best[j + 1:end + 1]
        best[j + 1:end + 1][better] = cost[better]
        back[j + 1:end + 1][better] = j
    out, e = [], n
    while e:
        j = int(back[e])
        out.append((j, e))
        e = j
    return out[::-1]
