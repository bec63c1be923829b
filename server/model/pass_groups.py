"""Which rows of a batched prefill go through the layers together.

A pass pads its rows to its longest (``RWKV7._pass_width``): every padded token costs a real
token's products, mixes and WKV steps, and its activations' memory. Grouping the rows only by
``prefill_tokens`` (rows x width per pass) put short rows beside a long one: in a served load
of 256 prompts of 67-691 tokens (``server.bench memory --load 256``'s), one pass of 16 rows was
padded to 704 tokens, 11,264 token slots for 4,077 tokens, and 25 % of all the load's batched
pass tokens were padding (docs/experiments/session69/pass_shapes.py). The largest pass sets a
served process's peak device memory (session 67).

``plan_passes`` splits the rows (longest first) into consecutive groups minimising padded tokens
plus a fixed cost a pass (``PASS_FIXED_TOKENS``: the weights read once, the launches), each
group at most ``cap`` tokens (rows x width) unless one row is wider: a dynamic programme over
the runs of rows of one width (at most a width per ``QUANTUM`` tokens: 64 runs at a pass chunk
of 1,024), ~1 ms of host time at 256 rows.
"""

from __future__ import annotations

PASS_FIXED_TOKENS = 256  # a pass's fixed cost in tokens: 2.9B on the H200, a 152-token pass
# took 5.4 ms and 4,096 tokens 18.3 us a token (docs/performance.md): ~2.6 ms, ~140 tokens, for
# a graphed single row; an eager pass of several rows launches ~400 kernels more
QUANTUM = 16  # widths within this many tokens are one run for the programme (its cost counts
# the run's widest)


def plan_passes(widths: list[int], cap: int,
                fixed: int = PASS_FIXED_TOKENS) -> list[tuple[int, int]]:
    """``[start, end)`` ranges of rows, in order, one a pass. ``widths``: each row's padded
    width, longest first (non-increasing); ``cap``: the tokens (rows x the group's first width)
    a pass holds at most; a row wider than ``cap`` goes alone."""
    if not widths:
        return []
    if any(b > a for a, b in zip(widths, widths[1:])):
        raise ValueError("plan_passes needs the widths longest first")
    starts, run_w = [], []  # each run's first row and its (quantised) width
    for i, w in enumerate(widths):
        q = -(-w // QUANTUM) * QUANTUM
        if not run_w or q != run_w[-1]:
            starts.append(i)
            run_w.append(q)
    starts.append(len(widths))
    m = len(run_w)
    best = [0] + [None] * m  # best[i]: the least cost of rows before run i
    back = [0] * (m + 1)
    for i in range(1, m + 1):
        for j in range(i):  # runs j..i-1 in one group (split by the cap): width run_w[j]
            rows, w = starts[i] - starts[j], run_w[j]
            per = max(1, cap // w)
            cost = best[j] + -(-rows // per) * fixed + rows * w
            if best[i] is None or cost < best[i]:
                best[i], back[i] = cost, j
    groups, i = [], m
    while i:
        j = back[i]
        groups.append((starts[j], starts[i]))
        i = j
    out = []
    for lo, hi in reversed(groups):
        while lo < hi:  # (the cap by each pass's own first row: later ones may be narrower)
            end = min(hi, lo + max(1, cap // widths[lo]))
            out.append((lo, end))
            lo = end
    return out
