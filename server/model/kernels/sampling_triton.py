"""The sampler's passes over the rows in one kernel each (CUDA).

`prepare`, the first pass over the logits: for every row b and token t,

    x[b, t] = (logits[b, t] - P[b, t]) / temp[b]        (temp[b] = 1: greedy rows, or TEMPER off)

which the torch path (`BatchSampler._prepare`) does in two passes over [B, V] (subtract,
divide): each pass reads or writes ~67 MB at batch 256 with a 65,536-token vocabulary. Same fp32
operations in the same order (IEEE division), so the results are the torch path's bit for bit;
rows are independent.

`update`, after the draw, for active rows: the penalties decay (`P *= decay`, a pass over the
row's [V] only where decay is not 1), then the sampled token's penalty grows by the presence
(first time, checked after the decay) or repetition penalty, and the row's random-stream counter
by one (`BatchSampler._update`). One program per row and block of columns; same fp32 operations
(no fused multiply-add), bit for bit. The decay is here, not in `prepare` (before session 50),
so that a token that ends its row (end-of-text, a new turn: not accepted, the engine's update
skips its row) leaves the penalties as they were: a continue then starts from the penalties
of the tokens returned, as a task fed them would.

`topk`, the candidates of rows whose top-k is small (k <= TOPK_MAX): `torch.topk` over a
65,536-token row is a multi-pass radix select (~260 us a step at batch 256, ~830 at 1,024 on the
H200, ~14 launches). Here four launches, reading the row twice: the maximum of each sub-block
of 16 columns, of which each 4,096-column block keeps its k largest; tau, the k-th largest of
those, per row (= the k-th largest sub-block maximum) (k values are >= tau, so the
row's k largest are among them; and the values >= tau lie in the k sub-blocks whose maxima are
>= tau, so there are at most 16 k <= MAX_CANDIDATES of them, ties at tau aside, however the
logits cluster: a vocabulary ordered by script gives whole blocks of unlikely tokens); every
block of 1,024 columns appends its values >= tau to the row's candidates (an atomic counter); a
program per row sorts its candidates (a bitonic top-k) and keeps the first k. `topk_draw` also
draws the token in that last program (the inverse-CDF draw of `sampler._draw_prefix`, ~20 small
torch launches there). A row with more than MAX_CANDIDATES candidates (many ties at tau: a flat
row) runs a top-k over all its values instead: slower, same result.
Each value is carried with its column in one int64 key (the fp32 bits mapped to an
order-preserving int32 in the high half, the column reversed in the low half), so the keys are
distinct and order as: larger value first, lower column first among equal values; the order in
which candidates were appended does not matter. The values come back exactly (the mapping is its
own inverse), descending, as `torch.topk(x, k, sorted=True)` returns them. (A first version, a
bitonic top-k per block of 4,096 columns, was 2x slower than `torch.topk` at batch 256; a
second took tau from the maxima of 1,024-column blocks: on logits clustered by token id, e.g. a
Chinese context where most blocks hold unlikely tokens, thousands of values passed it and rows
took the slow path; a third sorted all 4,096 sub-block maxima of a row in one program: 12 us
at batch 1.)
"""

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _prepare_kernel(logits_ptr, pen_ptr, temp_ptr, x_ptr, V, TEMPER: tl.constexpr,
                    BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = t < V
    o = b * V + t
    p = tl.load(pen_ptr + o, mask=m, other=0.0)
    x = tl.load(logits_ptr + o, mask=m, other=0.0).to(tl.float32) - p
    if TEMPER:
        x = tl.math.div_rn(x, tl.load(temp_ptr + b + t * 0))
    tl.store(x_ptr + o, x, mask=m)


_BLOCK = 4096


def prepare(logits: Tensor, penalties: Tensor, temp: Tensor | None) -> Tensor:
    """logits [B, V] (any float dtype), penalties [B, V] fp32 (read only); temp [B] fp32 or None
    (no division). Returns x [B, V] fp32."""
    B, V = logits.shape
    assert logits.is_contiguous() and penalties.is_contiguous()
    x = torch.empty(B, V, dtype=torch.float32, device=logits.device)
    _prepare_kernel[(B, triton.cdiv(V, _BLOCK))](
        logits, penalties, penalties if temp is None else temp, x, V,
        TEMPER=temp is not None, BLOCK=_BLOCK, num_warps=8)
    return x


@triton.jit
def _update_kernel(pen_ptr, tok_ptr, pres_ptr, rep_ptr, decay_ptr, act_ptr, count_ptr, V,
                   HAS_ACTIVE: tl.constexpr, BLOCK: tl.constexpr):
    """Row b, columns j * BLOCK ...: the decay where it is not 1, the token's entry where it
    falls in them (after its decay, in registers: one store an entry); block 0 counts the draw."""
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    live = True
    if HAS_ACTIVE:
        live = tl.load(act_ptr + b) != 0
    if live:
        decay = tl.load(decay_ptr + b)
        tok = tl.load(tok_ptr + b)
        pres = tl.load(pres_ptr + b)
        rep = tl.load(rep_ptr + b)
        if decay != 1.0:
            t = j * BLOCK + tl.arange(0, BLOCK)
            m = t < V
            p = tl.load(pen_ptr + b * V + t, mask=m, other=0.0) * decay
            p = tl.where(t == tok, p + tl.where(p == 0, pres, rep), p)
            tl.store(pen_ptr + b * V + t, p, mask=m)
        elif (tok >= j * BLOCK) & (tok < j * BLOCK + BLOCK):
            cur = tl.load(pen_ptr + b * V + tok)
            tl.store(pen_ptr + b * V + tok, cur + tl.where(cur == 0, pres, rep))
        if j == 0:
            tl.store(count_ptr + b, tl.load(count_ptr + b) + 1)


def update(penalties: Tensor, tokens: Tensor, presence: Tensor, repetition: Tensor,
           decay: Tensor, active: Tensor | None, counter: Tensor) -> None:
    """penalties [B, V] fp32 (in place, contiguous); tokens [B] int64; presence, repetition,
    decay [B] fp32; active [B] bool or None (all); counter [B] int64 (in place)."""
    B, V = penalties.shape
    assert penalties.is_contiguous()
    _update_kernel[(B, triton.cdiv(V, _BLOCK))](
        penalties, tokens, presence, repetition, decay,
        active if active is not None else tokens, counter, V, HAS_ACTIVE=active is not None,
        BLOCK=_BLOCK, num_warps=8, enable_fp_fusion=False)


TOPK_MAX = 64  # `topk` serves k up to this
MAX_CANDIDATES = 1024  # kept per row above the threshold; a row with more takes the slow path
# columns of a block-maxima program (its K largest of 256 sub-block maxima; H200, a sample step
# at batch 1: 43 us, 48 with tau sorting a row's 4,096 sub-block maxima; 1,024 columns at batch
# 1,024 and 256 was no faster: 743 and 219 vs 720 and 216 us)
_MAX_BLOCK = 4096


@triton.jit
def _to_key(x, col, V):
    bits = x.to(tl.int32, bitcast=True)
    s = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # order-preserving: negatives' magnitudes reversed
    return (s.to(tl.int64) << 32) | (V - 1 - col).to(tl.int64)


@triton.jit
def _block_max_kernel(x_ptr, max_ptr, V, BLOCK: tl.constexpr, SUB: tl.constexpr,
                      K: tl.constexpr):
    """The K largest maxima of the SUB-column sub-blocks of one BLOCK of columns (the row's k
    largest sub-block maxima are among the blocks' K largest, k <= K: tau's kernel sorts
    V / BLOCK * K values instead of V / SUB when BLOCK / SUB > K)."""
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    col = j * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + b * V + col, mask=col < V, other=-float("inf"))
    m = tl.topk(tl.max(tl.reshape(x, (BLOCK // SUB, SUB)), axis=1), K)
    tl.store(max_ptr + (b * tl.num_programs(1) + j) * K + tl.arange(0, K), m)


@triton.jit(do_not_specialize=["k"])  # one compiled variant for every k (a request's top_k)
def _tau_kernel(max_ptr, tau_ptr, cnt_ptr, NM, k, NMP: tl.constexpr, K: tl.constexpr):
    """tau = the k-th largest of the row's NM kept sub-block maxima = the k-th largest sub-block
    maximum of the row (k of its values are >= tau, so its
    k largest are among the values >= tau; the values >= tau lie in the k sub-blocks whose
    maxima are >= tau, ties aside: at most k * SUB of them); the row's candidate count reset."""
    b = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, NMP)
    top = tl.topk(tl.load(max_ptr + b * NM + i, mask=i < NM, other=-float("inf")), K)
    tl.store(tau_ptr + b, tl.max(tl.where(tl.arange(0, K) == k - 1, top, -float("inf")), axis=0))
    tl.store(cnt_ptr + b, 0)


@triton.jit
def _gather_kernel(x_ptr, tau_ptr, cnt_ptr, cand_ptr, V, BLOCK: tl.constexpr,
                   CAP: tl.constexpr):
    """Keys of the block's values >= tau, appended to the row's candidates. Most blocks hold
    none (the candidates lie in at most k sub-blocks): those stop after the comparison, with no
    scan and no atomic (H200, batch 1,024: the kernel took 225 us a step with them)."""
    b = tl.program_id(0).to(tl.int64)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + b * V + col, mask=col < V, other=-float("inf"))
    sel = (x >= tl.load(tau_ptr + b)) & (col < V)
    n = tl.sum(sel.to(tl.int32), axis=0)
    if n > 0:
        base = tl.atomic_add(cnt_ptr + b, n)
        pos = base + tl.cumsum(sel.to(tl.int32), axis=0) - 1
        tl.store(cand_ptr + b * CAP + pos, _to_key(x, col, V), mask=sel & (pos < CAP))


# per-row scalars: a pointer's alignment must not make a variant (u is a column of the pulse's
# [rows, steps] uniforms: at one row, step 1's is 8 bytes off; a variant compiled on the clock
# took a fresh server's request 2-4 s on the H200, session 22)
@triton.jit(do_not_specialize=["kmax"],
            do_not_specialize_on_alignment=["k_ptr", "p_ptr", "u_ptr", "tok_ptr"])
def _select_kernel(x_ptr, cand_ptr, cnt_ptr, val_ptr, idx_ptr, k_ptr, p_ptr, u_ptr, tok_ptr,
                   V, kmax, K: tl.constexpr, CAP: tl.constexpr, BLOCK: tl.constexpr,
                   DRAW: tl.constexpr):
    """The K largest keys of the row's candidates (all its values, block by block, when they
    did not fit), decoded; then either the first kmax stored (values, columns) or, DRAW, one
    token drawn among them as `sampler._draw_prefix` draws."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(cnt_ptr + b)
    i = tl.arange(0, CAP)
    pad = tl.full((CAP,), -2147483648, tl.int64) << 32  # below every value's key
    if n <= CAP:
        top = tl.topk(tl.load(cand_ptr + b * CAP + i, mask=i < n, other=pad), K)
    else:  # e.g. a row of equal values: a running top-K over the whole row
        top = tl.full((K,), -2147483648, tl.int64) << 32
        for start in range(0, V, BLOCK):
            col = start + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + b * V + col, mask=col < V, other=0.0)
            low = tl.full((BLOCK,), -2147483648, tl.int64) << 32
            blk = tl.topk(tl.where(col < V, _to_key(x, col, V), low), K)
            top = tl.topk(tl.reshape(tl.join(top, blk), (2 * K,)), K)
    s = (top >> 32).to(tl.int32)
    vals = (s ^ ((s >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)
    cols = V - 1 - (top & 0xFFFFFFFF)
    o = tl.arange(0, K)
    if DRAW:  # inverse CDF among the first k (the row's own top-k), truncated by top-p
        k = tl.load(k_ptr + b)
        p = tl.load(p_ptr + b)
        v0 = tl.max(tl.where(o == 0, vals, -float("inf")), axis=0)
        w = tl.where(o < k, tl.exp(vals - v0), 0.0).to(tl.float64)
        cum = tl.cumsum(w, axis=0)
        mass_k = tl.sum(tl.where(o == k - 1, cum, 0.0), axis=0)
        limit = tl.where(p >= 1, float("inf"), p.to(tl.float64) * mass_k)
        m = tl.maximum(tl.sum(((cum - w < limit) & (o < k)).to(tl.int32), axis=0), 1)
        total = tl.sum(tl.where(o == m - 1, cum, 0.0), axis=0)
        below = (total.to(tl.int64, bitcast=True) - 1).to(tl.float64, bitcast=True)  # > 0
        target = tl.minimum(tl.load(u_ptr + b) * total, below)
        pos = tl.sum((cum <= target).to(tl.int32), axis=0)
        tl.store(tok_ptr + b, tl.sum(tl.where(o == pos, cols, 0), axis=0))
    else:
        tl.store(val_ptr + b * kmax + o, vals, mask=o < kmax)
        tl.store(idx_ptr + b * kmax + o, cols, mask=o < kmax)


def _candidates(x: Tensor, kmax: int) -> tuple[Tensor, Tensor]:
    """The first three launches of `topk`: (candidate keys [R, MAX_CANDIDATES], counts [R])."""
    R, V = x.shape
    assert x.is_contiguous() and x.dtype == torch.float32 and 1 <= kmax <= min(TOPK_MAX, V)
    K = max(2, triton.next_power_of_2(kmax))
    # sub-blocks of SUB columns, at least kmax of them; kmax * SUB <= MAX_CANDIDATES. A block
    # of the first launch holds >= K sub-blocks (tl.topk's bound): next_power_of_2(V) / SUB >=
    # kmax is a power of 2, so >= K but where K > kmax = 1 (V <= 16): then padded to K * SUB
    sub = min(MAX_CANDIDATES // TOPK_MAX, 1 << ((V // kmax).bit_length() - 1))
    mblock = max(min(_MAX_BLOCK, triton.next_power_of_2(V)), K * sub)
    block = min(1024, triton.next_power_of_2(V))
    nm, nb = triton.cdiv(V, mblock) * K, triton.cdiv(V, block)
    f32 = dict(dtype=torch.float32, device=x.device)
    maxes, tau = torch.empty(R, nm, **f32), torch.empty(R, **f32)
    cnt = torch.empty(R, dtype=torch.int32, device=x.device)
    cand = torch.empty(R, MAX_CANDIDATES, dtype=torch.int64, device=x.device)
    _block_max_kernel[(R, nm // K)](x, maxes, V, BLOCK=mblock, SUB=sub, K=K, num_warps=4)
    _tau_kernel[(R,)](maxes, tau, cnt, nm, kmax, NMP=triton.next_power_of_2(nm), K=K,
                      num_warps=8)
    _gather_kernel[(R, nb)](x, tau, cnt, cand, V, BLOCK=block, CAP=MAX_CANDIDATES, num_warps=4)
    return cand, cnt


def _select(x, cand, cnt, kmax, out, draw=None):
    vals, idx, tok = out
    k, top_p, u = draw if draw is not None else (cnt, cnt, cnt)  # unused without a draw
    _select_kernel[(x.shape[0],)](x, cand, cnt, vals, idx, k, top_p, u, tok, x.shape[1], kmax,
                                  K=max(2, triton.next_power_of_2(kmax)), CAP=MAX_CANDIDATES,
                                  BLOCK=1024, DRAW=draw is not None, num_warps=8)


def topk(x: Tensor, kmax: int) -> tuple[Tensor, Tensor]:
    """x [R, V] fp32 contiguous, 1 <= kmax <= min(TOPK_MAX, V) -> (values [R, kmax] fp32
    descending, columns [R, kmax] int64): the kmax largest of each row, the lower column first
    among equal values (-0.0 ranks below +0.0; rows with NaN give undefined columns)."""
    R = x.shape[0]
    cand, cnt = _candidates(x, kmax)
    vals = torch.empty(R, kmax, dtype=torch.float32, device=x.device)
    idx = torch.empty(R, kmax, dtype=torch.int64, device=x.device)
    _select(x, cand, cnt, kmax, (vals, idx, idx))
    return vals, idx


def topk_draw(x: Tensor, kmax: int, k: Tensor, top_p: Tensor, u: Tensor) -> Tensor:
    """`sampler._draw_prefix` on `topk(x, kmax)` inside the last launch: k [R] int64 (1..kmax),
    top_p [R] fp32, u [R] fp64 in [0, 1) -> tokens [R] int64 (columns of x)."""
    R = x.shape[0]
    cand, cnt = _candidates(x, kmax)
    tok = torch.empty(R, dtype=torch.int64, device=x.device)
    _select(x, cand, cnt, kmax, (x, x, tok), (k.contiguous(), top_p.contiguous(),
                                               u.contiguous()))
    return tok
