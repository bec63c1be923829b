"""Skinny matrix products for decode at small batch: out[g] = epilogue(x[g] @ W[g]^T).

At a handful of rows a decode step is a weight read: cuBLAS's kernels for such shapes read the
weights at about half the bandwidth of the H200 (docs/performance.md). This kernel gives every
program ``BLOCK_N`` weight rows (contiguous along K) and a block of ``BLOCK_M`` input rows (up
to 16 rows, all of them: each weight tile is read once for all), and accumulates in fp32 through
one tensor-core product a tile. Above 16 rows the input rows are cut into blocks of
``block_m(M)`` (at most ``MAX_BLOCK_M``) and the programs of one weight tile's row blocks are
launched next to each other (the row block is the grid's fastest axis), so they read the tile
from HBM about once and from L2 the other times. The decode path uses it up to 4 rows
(``fused.GEMV_MAX_ROWS``: cuBLAS, with the LoRA stages on a second stream, is faster from 8
rows); up to 256 (a short prompt's pass, e.g. a cached chat turn's 152 tokens) it is a
candidate against cuBLAS, timed by ``python -m server.bench gemv --rows 152,192 --sweep
152,192``, not used by the forward until measured faster there (session 14, one row block of
all 256 rows: 2x slower than cuBLAS at 152 rows, docs/performance.md). A grid axis runs G
products of one shape in one launch (r, k, v; the LoRA stages). Epilogues fold the
neighbouring element-wise work into the product:

* ``EPI_STORE``: out = acc, in out's dtype;
* ``EPI_RELU2``: out = relu(acc)^2 (the FFN key), in out's dtype;
* ``EPI_ADD``: out += acc with out the fp32 residual (the output and FFN value products);
* ``EPI_LORA``: group 1 tanh, group 3 sigmoid, others as stored (the LoRA first stages: v, w, a, g).

``limits`` (optional, [G, 2] int32) bounds each group's valid N and K (the LoRA stacks, whose
rows and columns past a group's limits are the next group's, ``fused.lora_stacks``: outputs
past a group's N are not written and K stops at its limit).

**Split of K** (``split`` > 1): a product with few row blocks (at 2.9B the LoRA first stages
have ~20 blocks of 32 rows, the output and FFN value products 40-80 on 132 SMs) leaves much of
the GPU idle while each program walks the whole of K. Split, each of ``split`` programs of a row block reduces one slice of K and
writes its fp32 partial tile to a scratch buffer, then takes a ticket from the block's counter;
the program that draws the last ticket sums the partials in slice order (0, 1, ...) and applies
the epilogue, then resets the counter. The sum's order does not depend on which program comes
last, so results are the same run to run (no floating-point atomics). The scratch (partials and
counters, ``GemvScratch``) is shared by the launches of one stream: they run one after another
(with programmatic dependent launch too: a kernel touches no memory before its predecessor is
done, `pdl.py`). ``gemv_pair`` runs two independent products in one launch.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch import Tensor

from . import pdl

EPI_STORE, EPI_RELU2, EPI_ADD, EPI_LORA = 0, 1, 2, 3
MAX_ROWS = 256
MAX_SPLIT = 8
MAX_BLOCK_M = 64  # rows of a row block above 16 rows unless a configuration names its own
WAVES = 264  # programs that fill an H200 twice (132 SMs): a split of K aims at as many


def block_m(M: int, cap: int = MAX_BLOCK_M) -> int:
    """Rows of a program's row block: the power of two >= M (at least 16), at most ``cap``."""
    return max(16, min(triton.next_power_of_2(M), cap))


@triton.jit
def _epilogue(acc, out_ptr, g, rows, n, M, n_lim, som, EPI: tl.constexpr):
    if EPI == 1:
        acc = tl.maximum(acc, 0.0)
        acc = acc * acc
    if EPI == 3:
        if g == 1:
            acc = 2.0 / (1.0 + tl.exp(-2.0 * acc)) - 1.0  # tanh
        if g == 3:
            acc = 1.0 / (1.0 + tl.exp(-acc))
    o = out_ptr + rows[:, None] * som + n[None, :]
    om = (rows[:, None] < M) & (n[None, :] < n_lim)
    if EPI == 2:
        acc += tl.load(o, mask=om, other=0.0)
    tl.store(o, acc.to(out_ptr.dtype.element_ty), mask=om)


@triton.jit
def _gemv_program(pid, mb, m_blocks, g, s, n_blocks, x_ptr, w_ptr, out_ptr, lim_ptr, part_ptr,
                  count_ptr, M, N, K, split, k_per_split, sxg, sxm, swg, swn, sog, som,
                  EPI: tl.constexpr, LIMITS: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_M: tl.constexpr):
    """Weight block ``pid`` (BLOCK_N rows of W) of group ``g``, input row block ``mb`` (of
    ``m_blocks``), slice ``s`` of K (of ``split``)."""
    n_lim = N
    k_lim = K
    if LIMITS:
        n_lim = tl.minimum(tl.load(lim_ptr + 2 * g), N)
        k_lim = tl.minimum(tl.load(lim_ptr + 2 * g + 1), K)
    if pid * BLOCK_N < n_lim:
        local = tl.arange(0, BLOCK_M)
        rows = mb * BLOCK_M + local
        n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        kk = tl.arange(0, BLOCK_K)
        x_base = x_ptr + g * sxg + rows[:, None] * sxm
        w_base = w_ptr + g * swg + n[:, None].to(tl.int64) * swn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        k_start = s * k_per_split
        k_end = tl.minimum(k_start + k_per_split, k_lim)
        for k0 in range(k_start, k_end, BLOCK_K):
            k = k0 + kk
            km = k < k_end
            xt = tl.load(x_base + k[None, :], mask=(rows[:, None] < M) & km[None, :], other=0.0)
            wt = tl.load(w_base + k[None, :], mask=(n[:, None] < n_lim) & km[None, :],
                         other=0.0)
            acc = tl.dot(xt, tl.trans(wt), acc)
        out_g = out_ptr + g * sog
        if split == 1:
            _epilogue(acc, out_g, g, rows, n, M, n_lim, som, EPI)
        else:
            block = (g * n_blocks + pid) * m_blocks + mb  # this tile's counter and partials
            tile = local[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            part = part_ptr + block * split * BLOCK_M * BLOCK_N
            live = rows[:, None] < M  # rows past M are zero: not stored, not read back
            tl.store(part + s * BLOCK_M * BLOCK_N + tile, acc, mask=live)
            tl.debug_barrier()  # every thread's partial is written before the ticket
            ticket = tl.atomic_add(count_ptr + block, 1, sem="acq_rel")
            if ticket == split - 1:  # the last of the block's programs: sum in slice order
                total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for j in range(0, split):
                    total += tl.load(part + j * BLOCK_M * BLOCK_N + tile, mask=live, other=0.0,
                                     cache_modifier=".cg")
                tl.store(count_ptr + block, 0)
                _epilogue(total, out_g, g, rows, n, M, n_lim, som, EPI)


@triton.jit
def _flat_program(q, n_blocks, m_blocks, G, x_ptr, w_ptr, out_ptr, lim_ptr, part_ptr, count_ptr,
                  M, N, K, split, k_per_split, sxg, sxm, swg, swn, sog, som,
                  EPI: tl.constexpr, LIMITS: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_M: tl.constexpr):
    """Program ``q`` of a flat grid of m_blocks x n_blocks x G x split, the input row block
    fastest, then the weight block (programs launched together share weight tiles)."""
    rest = q // m_blocks
    rest2 = rest // n_blocks
    _gemv_program(rest % n_blocks, q % m_blocks, m_blocks, (rest2 % G).to(tl.int64), rest2 // G,
                  n_blocks, x_ptr, w_ptr, out_ptr, lim_ptr, part_ptr, count_ptr, M, N, K, split,
                  k_per_split, sxg, sxm, swg, swn, sog, som, EPI, LIMITS, BLOCK_N, BLOCK_K,
                  BLOCK_M)


@triton.jit(do_not_specialize=["split"])
def _gemv_kernel(x_ptr, w_ptr, out_ptr, lim_ptr, part_ptr, count_ptr, M, N, K, G, n_blocks,
                 split, k_per_split, sxg, sxm, swg, swn, sog, som, m_blocks,
                 EPI: tl.constexpr, LIMITS: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_M: tl.constexpr,
                 PDL: tl.constexpr):
    """Grid (m_blocks x n_blocks, G, split), the row block fastest. Not a flat grid: the
    divisions that split a flat index made the decode step (<= 16 rows, one row block: m_blocks
    is 1, which Triton specialises) 0.5 % slower on the H200 (2.470 against 2.457 ms at batch
    1, session 14)."""
    pdl.enter(PDL)
    q = tl.program_id(0)
    _gemv_program(q // m_blocks, q % m_blocks, m_blocks, tl.program_id(1).to(tl.int64),
                  tl.program_id(2), n_blocks, x_ptr, w_ptr, out_ptr, lim_ptr, part_ptr,
                  count_ptr, M, N, K, split, k_per_split, sxg, sxm, swg, swn, sog, som,
                  EPI, LIMITS, BLOCK_N, BLOCK_K, BLOCK_M)


@triton.jit(do_not_specialize=["split_a", "split_b"])
def _gemv_pair_kernel(
        xa, wa, oa, la, pa, ca, Na, Ka, Ga, nba, split_a, kps_a, sxga, sxma, swga, swna, soga,
        soma, xb, wb, ob, lb, pb, cb, Nb, Kb, Gb, nbb, split_b, kps_b, sxgb, sxmb, swgb, swnb,
        sogb, somb, M, m_blocks,
        EPI_A: tl.constexpr, LIM_A: tl.constexpr, BN_A: tl.constexpr, BK_A: tl.constexpr,
        EPI_B: tl.constexpr, LIM_B: tl.constexpr, BN_B: tl.constexpr, BK_B: tl.constexpr,
        BLOCK_M: tl.constexpr, PDL: tl.constexpr):
    """Two independent products in one launch: programs [0, m_blocks·nba·Ga·split_a) run A,
    the rest B."""
    pdl.enter(PDL)
    q = tl.program_id(0)
    n_a = m_blocks * nba * Ga * split_a
    if q < n_a:
        _flat_program(q, nba, m_blocks, Ga, xa, wa, oa, la, pa, ca, M, Na, Ka, split_a, kps_a,
                      sxga, sxma, swga, swna, soga, soma, EPI_A, LIM_A, BN_A, BK_A, BLOCK_M)
    else:
        _flat_program(q - n_a, nbb, m_blocks, Gb, xb, wb, ob, lb, pb, cb, M, Nb, Kb, split_b,
                      kps_b, sxgb, sxmb, swgb, swnb, sogb, somb, EPI_B, LIM_B, BN_B, BK_B,
                      BLOCK_M)


class GemvScratch:
    """Partial tiles and per-tile counters of split products on one device (counters are zero
    between launches: the last program of a tile resets its own), for products of at most
    ``rows`` output rows in all (G x N rounded up to the weight block) and at most ``max_m``
    input rows (``m_rows``: rounded up to whole row blocks of any size up to 256)."""

    def __init__(self, device, rows: int, max_m: int = 16):
        self.rows = rows
        self.m_rows = max(16, triton.next_power_of_2(max_m))
        self.partials = torch.empty(MAX_SPLIT * self.m_rows * rows, dtype=torch.float32,
                                    device=device)
        self.counters = torch.zeros(triton.cdiv(rows, 16) * (self.m_rows // 16),
                                    dtype=torch.int32, device=device)


def _config(M: int, N: int, K: int, G: int) -> tuple[int, ...]:
    """(BLOCK_N, BLOCK_K, num_warps, num_stages, split) for this shape: the fastest of a sweep on
    the H200 at 1 row (`python -m server.bench gemv --rows 1,16 --sweep 1`, docs/performance.md)
    for the products of a 2.9B layer; other sizes take the rule of the nearest shape. A sixth
    entry, where given, is the row block (BLOCK_M; else ``block_m(M)``)."""
    if M > 16:  # not measured: a starting point for the sweep; K split until ~WAVES programs
        programs = triton.cdiv(M, block_m(M)) * triton.cdiv(N, 64) * G
        return 64, 64, 4, 3, max(1, min(MAX_SPLIT, WAVES // programs))
    if N >= 8 * K:  # the head: vocabulary x C
        return 64, 256, 4, 3, 1
    if N > K:  # FFN key (4C x C); LoRA second stages (C x D)
        return (32, 256, 4, 4, 1) if G > 1 else (32, 128, 4, 4, 1)
    if N < K:  # LoRA first stages (D x C), FFN value (C x 4C): few row blocks, long rows
        return (32, 512, 4, 4, 8) if G > 1 else (32, 128, 4, 3, 8)
    if G > 1:  # r, k, v
        return 64, 256, 4, 4, 1
    return 64, 256, 4, 3, 4  # output (C x C)


def split_of(K: int, block_k: int, split: int) -> tuple[int, int]:
    """(slices, K per slice) that a configured split becomes: at most MAX_SPLIT and one slice
    per ``block_k`` block, each slice a whole number of blocks, no empty slice (e.g. K = 2560,
    block 512, split 8 runs as 5 slices of 512)."""
    split = max(1, min(split, MAX_SPLIT, triton.cdiv(K, block_k)))
    k_per_split = triton.cdiv(triton.cdiv(K, split), block_k) * block_k
    return triton.cdiv(K, k_per_split), k_per_split


@dataclass
class _Product:
    """One product's launch arguments (``_prepare``)."""
    out: Tensor
    args: list  # x, w, out, limits, partials, counters, N, K, G, n_blocks, split, k_per_split,
    #             then the six strides
    epi: int
    limits: bool
    block_n: int
    block_k: int
    warps: int
    stages: int
    M: int
    scratch_rows: int  # output rows of scratch it needs (0: not split)
    blocks: int  # counters it needs (G x n_blocks when split)
    block_m: int  # rows of a row block
    m_blocks: int  # row blocks (cdiv(M, block_m))


def _prepare(x: Tensor, w: Tensor, out: Tensor | None, epi: int, limits: Tensor | None,
             config, scratch: GemvScratch | None, rows_before: int = 0,
             blocks_before: int = 0) -> tuple[_Product, GemvScratch | None]:
    """Check the shapes, allocate ``out`` if needed and work out the launch of one product; a
    split one takes the scratch after ``rows_before`` rows and ``blocks_before`` counters (the
    first product of a pair). Returns the product and the scratch (made if none was given)."""
    squeeze = x.dim() == 2
    x3, w3 = (x.unsqueeze(0), w.unsqueeze(0)) if squeeze else (x, w)
    G, M, K = x3.shape
    N = w3.shape[1]
    if M > MAX_ROWS or w3.shape[2] != K or w3.shape[0] != G:
        raise ValueError(f"gemv: x {tuple(x.shape)} and w {tuple(w.shape)} do not fit "
                         f"(M <= {MAX_ROWS})")
    if x3.stride(-1) != 1 or w3.stride(-1) != 1:
        raise ValueError("gemv needs x and w contiguous along K")
    if out is None:
        if epi == EPI_ADD:
            raise ValueError("EPI_ADD adds into a given out")
        out = torch.empty((G, M, N) if not squeeze else (M, N), dtype=x.dtype, device=x.device)
    o3 = out.unsqueeze(0) if squeeze else out
    if tuple(o3.shape) != (G, M, N) or o3.stride(-1) != 1:
        raise ValueError(f"gemv: out {tuple(out.shape)} must be [G, M, N] contiguous along N")
    config = config or _config(M, N, K, G)
    block_n, block_k, warps, stages, split = config[:5]
    bm = block_m(M, *config[5:])
    n_blocks, m_blocks = triton.cdiv(N, block_n), triton.cdiv(M, bm)
    split, k_per_split = split_of(K, block_k, split)
    rows = blocks = 0
    part = count = x3  # unused unless split
    if split > 1:
        rows, blocks = G * n_blocks * block_n, G * n_blocks * m_blocks
        if scratch is None:
            scratch = GemvScratch(x.device, rows_before + rows, M)
        if rows_before + rows > scratch.rows or m_blocks * bm > scratch.m_rows:
            raise ValueError(f"gemv: scratch for {scratch.rows} output rows of up to "
                             f"{scratch.m_rows} input rows, {rows_before + rows} of "
                             f"{m_blocks * bm} needed")
        part = scratch.partials[rows_before * MAX_SPLIT * scratch.m_rows:]
        count = scratch.counters[blocks_before:]
    args = [x3, w3, o3, limits if limits is not None else x3, part, count, N, K, G, n_blocks,
            split, k_per_split, x3.stride(0), x3.stride(1), w3.stride(0), w3.stride(1),
            o3.stride(0), o3.stride(1)]
    return _Product(out, args, epi, limits is not None, block_n, block_k, warps, stages, M,
                    rows, blocks, bm, m_blocks), scratch


def gemv(x: Tensor, w: Tensor, out: Tensor | None = None, epi: int = EPI_STORE,
         limits: Tensor | None = None, config: tuple[int, ...] | None = None,
         scratch: GemvScratch | None = None) -> Tensor:
    """x [M, K] or [G, M, K]; w [N, K] or [G, N, K] (rows contiguous along K); M <= 256.
    Returns out ([M, N] / [G, M, N]; allocated in x's dtype unless given; EPI_ADD needs it).
    A split configuration uses ``scratch`` (a fresh one per call without it: correct, slower)."""
    p, _ = _prepare(x, w, out, epi, limits, config, scratch)
    x3, w3, o3, lim, part, count, N, K, G, n_blocks, split, kps, *strides = p.args
    _gemv_kernel[(p.m_blocks * n_blocks, G, split)](
        x3, w3, o3, lim, part, count, p.M, N, K, G, n_blocks, split, kps, *strides, p.m_blocks,
        EPI=epi, LIMITS=p.limits, BLOCK_N=p.block_n, BLOCK_K=p.block_k, BLOCK_M=p.block_m,
        num_warps=p.warps, num_stages=p.stages, **pdl.launch_options(x.device, p.M))
    return p.out


def gemv_pair(a: dict, b: dict, scratch: GemvScratch | None = None) -> tuple[Tensor, Tensor]:
    """Two independent products of the same rows count in one launch (e.g. r/k/v and the LoRA
    first stages, which read the same mixed inputs): ``a`` and ``b`` are ``gemv``'s keyword
    arguments (x, w, out, epi, limits, config). The launch takes ``a``'s warps and stages.
    Same results as two ``gemv`` calls."""
    if scratch is None:  # one scratch for both (each product's rows, rounded up to a block)
        rows = sum(p["x"].shape[0] * (p["w"].shape[-2] + 128) if p["x"].dim() == 3
                   else p["w"].shape[-2] + 128 for p in (a, b))
        scratch = GemvScratch(a["x"].device, rows, a["x"].shape[-2])
    pa, scratch = _prepare(a["x"], a["w"], a.get("out"), a.get("epi", EPI_STORE),
                           a.get("limits"), a.get("config"), scratch)
    pb, _ = _prepare(b["x"], b["w"], b.get("out"), b.get("epi", EPI_STORE), b.get("limits"),
                     b.get("config"), scratch, pa.scratch_rows, pa.blocks)
    if pa.M != pb.M or pa.block_m != pb.block_m:
        raise ValueError(f"gemv_pair: {pa.M} and {pb.M} rows, blocks {pa.block_m}, {pb.block_m}")
    n = [p.m_blocks * p.args[9] * p.args[8] * p.args[10] for p in (pa, pb)]  # x n_blocks x G
    # x split
    _gemv_pair_kernel[(n[0] + n[1],)](
        *pa.args, *pb.args, pa.M, pa.m_blocks, EPI_A=pa.epi, LIM_A=pa.limits, BN_A=pa.block_n,
        BK_A=pa.block_k, EPI_B=pb.epi, LIM_B=pb.limits, BN_B=pb.block_n, BK_B=pb.block_k,
        BLOCK_M=pa.block_m, num_warps=pa.warps, num_stages=pa.stages, **pdl.launch_options(pa.out.device, pa.M))
    return pa.out, pb.out
