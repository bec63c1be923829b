"""The products of one layer at decode batch sizes: cuBLAS (the fused path's large-batch calls)
against the skinny-product kernel (server/model/kernels/gemv_triton.py).

    python -m server.bench gemv --preset 2.9b --rows 1,2,4,8,16 [--sweep 1]
    python -m server.bench gemv --rows 1 --sweep 1 --products ffn --warps 4,8 --stages 2,3,4,5
    python -m server.bench gemv --rows 160 --sweep 160 --block-n 64,128 --block-k 64,128 \
        --warps 4,8 --stages 3,4 --block-m 32,64   # a short prompt's pass (not used yet)

Each case is timed inside a CUDA graph (launch costs as in the decode graph) over enough weight
copies to defeat the L2 cache (>= 256 MB read per replay). GB/s counts the weight bytes a product
needs (the LoRA stacks: their unpadded parts). ``--sweep`` also times every kernel configuration
(BLOCK_N, BLOCK_K, warps, stages, split of K; each list settable) and prints the best per case.
``--large`` adds batch 256 and 1024 rows of r/k/v as three products against one batched product.
At many rows (decode at batch 256-1,024):

    python -m server.bench gemv --rows 1024 --split-k        # cuBLAS split over K
    python -m server.bench gemv --rows 1024,256 --tiles      # the kernel with large tiles
    python -m server.bench gemv --rows 1024 --tiles --sustain 3   # cuBLAS over 3 s (clocks
        # under the power limit; wrap in server/bench/with_clocks.sh to see them)
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch
import torch.nn.functional as F
import triton

from server.bench.common import table

L2_DEFEAT_BYTES = 256 << 20
# (BLOCK_N, BLOCK_K, warps, stages, split of K, BLOCK_M): the split is a run-time argument (no
# compile); BLOCK_M matters above 16 rows only (the rows' block, gemv_triton.block_m)
SWEEP = dict(block_n=(16, 32, 64), block_k=(128, 256, 512), warps=(4,), stages=(3, 4),
             split=(1, 2, 4, 8), block_m=(64,))


def _graph(fn, copies: int) -> "torch.cuda.CUDAGraph":
    """A CUDA graph of fn(0), ..., fn(copies - 1) (i = weight copy), replayed once."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(min(copies, 3)):
            fn(i)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(copies):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    return g


def graph_time(fn, copies: int, reps: int = 5) -> float:
    """Microseconds per call of fn(i) (i = weight copy), launched from a CUDA graph: the best
    of ``reps`` replays (a burst of a few ms: the GPU at its clocks before any power limit)."""
    g = _graph(fn, copies)
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(reps):
        t0.record()
        g.replay()
        t1.record()
        t1.synchronize()
        best = min(best, t0.elapsed_time(t1) * 1e3 / copies)
    return best


def sustained_time(fn, copies: int, seconds: float) -> float:
    """Microseconds per call of fn(i) over ``seconds`` of back-to-back graph replays (the
    clocks the GPU holds under its power limit, as a long decode run sees them)."""
    g = _graph(fn, copies)
    t0 = time.perf_counter()
    calls = 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            g.replay()
        calls += 8 * copies
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6 / calls


def cases(C: int, D: int, V: int, dims: list[int], dt, dev):
    """(name, G, N, K, epi, limits, useful bytes) of the products of one layer."""
    from server.model.kernels import gemv_triton as gt

    lim1 = torch.tensor([[d, C] for d in dims], dtype=torch.int32, device=dev)
    lim2 = torch.tensor([[C, d] for d in dims], dtype=torch.int32, device=dev)
    b = 2 if dt != torch.float32 else 4
    return [("r,k,v", 3, C, C, gt.EPI_STORE, None, 3 * C * C * b),
            ("output (+=)", 1, C, C, gt.EPI_ADD, None, C * C * b),
            ("ffn key (relu^2)", 1, 4 * C, C, gt.EPI_RELU2, None, 4 * C * C * b),
            ("ffn value (+=)", 1, C, 4 * C, gt.EPI_ADD, None, 4 * C * C * b),
            ("lora 1st", 4, D, C, gt.EPI_LORA, lim1, sum(dims) * C * b),
            ("lora 2nd", 4, C, D, gt.EPI_STORE, lim2, sum(dims) * C * b),
            ("head", 1, V, C, gt.EPI_STORE, None, V * C * b)]


def torch_call(G, M, N, K, epi, x, w, out):
    """cuBLAS and torch element-wise ops standing in for fused.py's products above its skinny
    rows, as the ``gemv`` tables of sessions 6-14 timed them. Not fused.py's exact calls: it
    applies relu² as ``relu_`` + ``mul_`` and the residual add as ``F.linear`` + ``add_``
    (fused.py: ``relu_sq_``, ``addmm(out_dtype=fp32)``, ``lora_act_``, which ``--tiles``
    reproduces); kept so those tables' commands still print what they printed."""
    from server.model.kernels import gemv_triton as gt

    if G > 1:
        y = torch.bmm(x, w.transpose(1, 2))
        if epi == gt.EPI_LORA:
            y[1].tanh_()
            y[3].sigmoid_()
        return y
    y = F.linear(x[0], w[0])
    if epi == gt.EPI_RELU2:
        y = torch.relu_(y)
        y.mul_(y)
    elif epi == gt.EPI_ADD:
        out[0].add_(y)
    return y


def reference(x, w, epi: int, lim) -> list:
    """Per group: fp32 product over the group's limits, then the epilogue (not EPI_ADD)."""
    from server.model.kernels import gemv_triton as gt

    outs = []
    for g in range(x.shape[0]):
        n, k = lim[g].tolist() if lim is not None else w.shape[1:]
        y = x[g, :, :k].float() @ w[g, :n, :k].float().T
        if epi == gt.EPI_RELU2:
            y = y.relu() ** 2
        elif epi == gt.EPI_LORA and g in (1, 3):
            y = y.tanh() if g == 1 else y.sigmoid()
        outs.append(y)
    return outs


def run_case(case, M: int, dt, dev, sweep: list) -> dict:
    from server.model.kernels.gemv_triton import (EPI_ADD, MAX_ROWS, GemvScratch, _config, gemv,
                                                  split_of)

    name, G, N, K, epi, lim, nbytes = case
    copies = max(4, -(-L2_DEFEAT_BYTES // (G * N * K * 2)))
    ws = [torch.randn(G, N, K, device=dev, dtype=dt) * 0.02 for _ in range(copies)]
    x = torch.randn(G, M, K, device=dev, dtype=dt)
    out = torch.zeros(G, M, N, device=dev, dtype=torch.float32 if epi == EPI_ADD else dt)
    row = {"product": name, "rows": M, "G×N×K": f"{G}×{N}×{K}"}
    t_torch = graph_time(lambda i: torch_call(G, M, N, K, epi, x, ws[i], out), copies)
    row["cuBLAS µs"] = f"{t_torch:.1f}"
    row["cuBLAS GB/s"] = f"{nbytes / t_torch / 1e3:.0f}"
    row["cuBLAS TFLOP/s"] = f"{2 * G * M * N * K / t_torch / 1e6:.0f}"
    if M > MAX_ROWS:  # beyond the kernel's rows: cuBLAS alone (e.g. decode at batch 1,024)
        return row
    scratch = GemvScratch(dev, G * (N + 128), M)  # row blocks up to 128
    configs = [_config(M, N, K, G)] + sweep
    best = None
    for cfg in configs:
        try:
            t = graph_time(lambda i: gemv(x, ws[i], out=out, epi=epi, limits=lim, config=cfg,
                                          scratch=scratch), copies, reps=3)
        except Exception as e:  # a configuration Triton rejects (e.g. out of shared memory)
            print(f"  {name} M={M} {cfg}: {type(e).__name__}")
            continue
        if cfg is configs[0]:
            row["gemv µs"] = f"{t:.1f}"
            row["gemv GB/s"] = f"{nbytes / t / 1e3:.0f}"
        if best is None or t < best[0]:
            best = (t, cfg)
        if sweep:  # the best time at each split of K (as it runs: gemv_triton.split_of)
            key = f"split {split_of(K, cfg[1], cfg[4])[0]} µs"
            row[key] = f"{min(t, float(row.get(key, 'inf'))):.1f}"
    if sweep and best is not None:
        row["best µs"] = f"{best[0]:.1f}"
        row["best GB/s"] = f"{nbytes / best[0] / 1e3:.0f}"
        row["best (BN, BK, warps, stages, split, BM)"] = str(best[1])
        row["split as run"] = str(split_of(K, best[1][1], best[1][4])[0])
    if epi != EPI_ADD:  # the kernel against fp32 products on this shape
        cfg = best[1] if best is not None else None
        got = gemv(x, ws[0], epi=epi, limits=lim, config=cfg, scratch=scratch).float()
        err = 0.0
        for g, want in enumerate(reference(x, ws[0], epi, lim)):
            d = (got[g, :, :want.shape[1]] - want).abs().max() / want.abs().max().clamp_min(1e-30)
            err = max(err, d.item())
        row["max rel err"] = f"{err:.1e}"
    return row


def pair_row(C: int, D: int, dims: list[int], M: int, dt, dev) -> dict:
    """r/k/v and the LoRA first stages as two launches and as one (gemv_pair), default tiles."""
    from server.model.kernels import gemv_triton as gt

    lim = torch.tensor([[d, C] for d in dims], dtype=torch.int32, device=dev)
    per = 3 * C * C + 4 * D * C
    copies = max(4, -(-L2_DEFEAT_BYTES // (per * 2)))
    ws = [(torch.randn(3, C, C, device=dev, dtype=dt), torch.randn(4, D, C, device=dev, dtype=dt))
          for _ in range(copies)]
    xa, xb = torch.randn(3, M, C, device=dev, dtype=dt), torch.randn(4, M, C, device=dev, dtype=dt)
    scratch = gt.GemvScratch(dev, 4 * (C + 64), M)
    two = graph_time(lambda i: (gt.gemv(xa, ws[i][0], scratch=scratch),
                                gt.gemv(xb, ws[i][1], epi=gt.EPI_LORA, limits=lim,
                                        scratch=scratch)), copies)
    one = graph_time(lambda i: gt.gemv_pair(
        dict(x=xa, w=ws[i][0]), dict(x=xb, w=ws[i][1], epi=gt.EPI_LORA, limits=lim), scratch),
        copies)
    nbytes = (3 * C * C + sum(dims) * C) * 2
    return {"rows": M, "r,k,v + lora 1st: two launches µs": f"{two:.1f}",
            "one launch µs": f"{one:.1f}", "one launch GB/s": f"{nbytes / one / 1e3:.0f}"}


def large_rows(C: int, dt, dev) -> list[dict]:
    """r/k/v at many rows: three nn.Linear products against one batched product."""
    rows = []
    copies = max(4, -(-L2_DEFEAT_BYTES // (3 * C * C * 2)))
    ws = [torch.randn(3, C, C, device=dev, dtype=dt) * 0.02 for _ in range(copies)]
    for M in (32, 256, 1024):
        x = torch.randn(3, M, C, device=dev, dtype=dt)
        three = graph_time(lambda i: [F.linear(x[j], ws[i][j]) for j in range(3)], copies)
        one = graph_time(lambda i: torch.bmm(x, ws[i].transpose(1, 2)), copies)
        tflop = 2 * 3 * M * C * C / 1e6
        rows.append({"rows": M, "3 × linear µs": f"{three:.1f}", "bmm µs": f"{one:.1f}",
                     "3 × linear TFLOP/s": f"{tflop / three:.0f}",
                     "bmm TFLOP/s": f"{tflop / one:.0f}"})
    return rows


def split_k_product(x: torch.Tensor, w: torch.Tensor, parts: int) -> torch.Tensor:
    """fp32 x [M, K] @ w [N, K]^T as ``parts`` products over slices of K in one strided batched
    cuBLAS call (views: no copy), summed: [parts, M, N] -> [M, N]."""
    M, K = x.shape
    N = w.shape[0]
    xs = x.view(M, parts, K // parts).transpose(0, 1)
    ws = w.view(N, parts, K // parts).transpose(0, 1)
    return torch.bmm(xs, ws.transpose(1, 2), out_dtype=torch.float32).sum(0)


def split_k_rows(C: int, M: int, dt, dev) -> list[dict]:
    """The single products of a layer at M rows (the output and FFN products, a short prompt's
    pass) as cuBLAS runs them in fused.py against split over K (``split_k_product``) and the
    epilogue; µs of one product from a CUDA graph."""
    rows = []
    for name, N, K, epi in (("output (+=)", C, C, "add"), ("ffn key (relu^2)", 4 * C, C, "relu2"),
                            ("ffn value (+=)", C, 4 * C, "add")):
        copies = max(4, -(-L2_DEFEAT_BYTES // (N * K * 2)))
        ws = [torch.randn(N, K, device=dev, dtype=dt) * 0.02 for _ in range(copies)]
        x = torch.randn(M, K, device=dev, dtype=dt)
        acc = torch.zeros(M, N, device=dev, dtype=torch.float32)

        def as_run(i):
            if epi == "add":
                torch.addmm(acc, x, ws[i].t(), out_dtype=torch.float32, out=acc)
            else:
                torch.relu_(F.linear(x, ws[i])).square_()

        def split(i, parts):
            y = split_k_product(x, ws[i], parts)
            if epi == "add":
                acc.add_(y)
            else:
                torch.relu_(y).square_().to(dt)

        row = {"product": name, "rows": M, "N×K": f"{N}×{K}",
               "as run µs": f"{graph_time(as_run, copies):.1f}"}
        want = x.float() @ ws[0].float().t()
        for parts in (2, 4, 8):
            row[f"split {parts} µs"] = f"{graph_time(lambda i: split(i, parts), copies):.1f}"
            err = ((split_k_product(x, ws[0], parts) - want).abs().max() / want.abs().max())
            row[f"split {parts} rel err"] = f"{err.item():.1e}"
        rows.append(row)
        print(row, flush=True)
    return rows


LARGE_CONFIGS = ((128, 64, 8, 3, 128), (256, 64, 8, 3, 128), (128, 64, 4, 4, 128),
                 (128, 64, 8, 4, 64), (256, 64, 8, 4, 128), (128, 128, 8, 3, 128))
LORA1_CONFIGS = ((64, 64, 4, 4, 128), (64, 128, 4, 3, 128), (128, 64, 8, 3, 128),
                 (64, 64, 4, 4, 64), (32, 128, 4, 3, 128), (64, 64, 4, 3, 256))
LORA2_CONFIGS = ((128, 64, 8, 3, 128), (128, 64, 4, 3, 64), (256, 64, 8, 3, 128),
                 (64, 64, 4, 3, 128), (128, 128, 8, 2, 128), (128, 32, 4, 3, 128))


def triton_large_rows(C: int, M: int, dt, dev, dims: list[int], wanted: list[str],
                      configs=LARGE_CONFIGS, sustain: float = 0.0) -> list[dict]:
    """The products of a layer at many rows (decode at batch 1,024): cuBLAS with the forward's
    element-wise work (``torch_call``; the FFN key's relu^2 as fused.py's one kernel) against
    the skinny-product kernel's program launched with large tiles (BLOCK_N, BLOCK_K, warps,
    stages, BLOCK_M), its epilogue folding that work (no split of K), µs from a CUDA graph.
    The LoRA stages: cuBLAS over the zero-padded stacks (and the first stage's activations, as
    fused.py runs them) against the kernel stopping at each group's own size (``limits``);
    TFLOP/s count the unpadded work. ``sustain`` > 0: cuBLAS also over that many seconds of
    replays (under the power limit; ``configs`` empty: cuBLAS alone)."""
    from server.model.kernels import fused_triton
    from server.model.kernels import gemv_triton as gt

    rows = []
    D = -(-max(dims) // 16) * 16
    lim1 = torch.tensor([[d, C] for d in dims], dtype=torch.int32, device=dev)
    lim2 = torch.tensor([[C, d] for d in dims], dtype=torch.int32, device=dev)
    for name, G, N, K, epi, lim, tiles in (
            ("r,k,v", 3, C, C, gt.EPI_STORE, None, configs),
            ("output (+=)", 1, C, C, gt.EPI_ADD, None, configs),
            ("ffn key (relu^2)", 1, 4 * C, C, gt.EPI_RELU2, None, configs),
            ("ffn value (+=)", 1, C, 4 * C, gt.EPI_ADD, None, configs),
            ("lora 1st (act)", 4, D, C, gt.EPI_LORA, lim1, LORA1_CONFIGS if configs else ()),
            ("lora 2nd", 4, C, D, gt.EPI_STORE, lim2, LORA2_CONFIGS if configs else ())):
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        copies = max(4, -(-L2_DEFEAT_BYTES // (G * N * K * 2)))
        ws = [torch.randn(G, N, K, device=dev, dtype=dt) * 0.02 for _ in range(copies)]
        if lim is not None:  # zero-padded stacks (fused.py's overlap: the same products)
            for w in ws:
                for g, (n, k) in enumerate(lim.tolist()):
                    w[g, n:].zero_()
                    w[g, :, k:].zero_()
        x = torch.randn(G, M, K, device=dev, dtype=dt)
        out = torch.zeros(G, M, N, device=dev, dtype=torch.float32 if epi == gt.EPI_ADD else dt)

        def as_run(i):
            if epi == gt.EPI_RELU2:
                return fused_triton.relu_sq_(F.linear(x[0], ws[i][0]))
            if epi == gt.EPI_ADD:
                return torch.addmm(out[0], x[0], ws[i][0].t(), out_dtype=torch.float32,
                                   out=out[0])
            y = torch.bmm(x, ws[i].transpose(1, 2))
            return fused_triton.lora_act_(y, lim) if epi == gt.EPI_LORA else y

        t = graph_time(as_run, copies)
        flop = 2 * M * sum(n * k for n, k in lim.tolist()) / 1e6 if lim is not None else \
            2 * G * M * N * K / 1e6  # useful work (LoRA: unpadded)
        row = {"product": name, "rows": M, "cuBLAS µs": f"{t:.1f}",
               "cuBLAS TFLOP/s": f"{flop / t:.0f}"}
        if sustain:
            ts = sustained_time(as_run, copies, sustain)
            row[f"cuBLAS over {sustain:g} s µs"] = f"{ts:.1f}"
            row[f"cuBLAS over {sustain:g} s TFLOP/s"] = f"{flop / ts:.0f}"
        def launch(w, o, cfg):  # one product through the kernel's program, split 1
            bn, bk, warps, stages, bm = cfg
            nb, mb = triton.cdiv(N, bn), triton.cdiv(M, bm)
            gt._gemv_kernel[(mb * nb, G, 1)](
                x, w, o, lim if lim is not None else x, x, x, M, N, K, G, nb, 1, K,
                x.stride(0), x.stride(1), w.stride(0), w.stride(1), o.stride(0), o.stride(1),
                mb, EPI=epi, LIMITS=lim is not None, BLOCK_N=bn, BLOCK_K=bk, BLOCK_M=bm,
                PDL=False, num_warps=warps, num_stages=stages)

        best = None
        for cfg in tiles:
            try:
                tk = graph_time(lambda i, c=cfg: launch(ws[i], out, c), copies, reps=3)
            except Exception as e:  # e.g. out of shared memory
                print(f"  {name} {cfg}: {type(e).__name__}: {str(e)[:80]}")
                continue
            if best is None or tk < best[0]:
                best = (tk, cfg)
        if best is not None:
            row["kernel best µs"] = f"{best[0]:.1f}"
            row["kernel TFLOP/s"] = f"{flop / best[0]:.0f}"
            row["(BN, BK, warps, stages, BM)"] = str(best[1])
            if epi != gt.EPI_ADD:  # the best configuration against fp32 products
                got = torch.zeros_like(out)
                launch(ws[0], got, best[1])
                err = max(((got[g, :, :want.shape[1]].float() - want).abs().max()
                           / want.abs().max()).item()
                          for g, want in enumerate(reference(x, ws[0], epi, lim)))
                row["max rel err"] = f"{err:.1e}"
        rows.append(row)
        print(row, flush=True)
    return rows


def dict_table(rows: list[dict]) -> str:
    header = list(dict.fromkeys(k for r in rows for k in r))
    return table(header, [[r.get(k, "") for k in header] for r in rows])


def main(argv=None) -> None:
    from server.model.random import PRESETS, _lora

    p = argparse.ArgumentParser(prog="server.bench gemv", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="2.9b", choices=PRESETS)
    p.add_argument("--rows", default="1,2,4,8,16")
    p.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    p.add_argument("--vocab", type=int, default=65536)
    p.add_argument("--sweep", default="", help="rows (e.g. 1,16) at which to time every "
                   "kernel configuration")
    p.add_argument("--large", action="store_true", help="also r/k/v at 32/256/1024 rows")
    p.add_argument("--split-k", action="store_true", help="only: the single products at --rows "
                   "as run against cuBLAS over slices of K (split_k_rows)")
    p.add_argument("--tiles", action="store_true", help="only: r/k/v, output and FFN products at "
                   "--rows as cuBLAS runs them against the kernel with large tiles and its "
                   "epilogues (decode at many rows)")
    p.add_argument("--sustain", type=float, default=0.0, help="with --tiles: cuBLAS also over "
                   "this many seconds of back-to-back replays, the kernel's tiles skipped")
    p.add_argument("--products", default="", help="only these products (name prefixes, "
                   "comma-separated, e.g. 'ffn,lora 1st')")
    for key, values in SWEEP.items():
        p.add_argument(f"--{key.replace('_', '-')}", default=",".join(map(str, values)),
                       help=f"the sweep's values (default {','.join(map(str, values))})")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("gemv benchmark needs CUDA")
    dev, dt = "cuda", {"fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    _, C = PRESETS[a.preset]
    dims = [_lora(1.7, C), _lora(2.5, C), _lora(2.5, C), _lora(5.0, C)]  # v, w, a, g
    D = -(-max(dims) // 16) * 16
    grid = list(itertools.product(*([int(v) for v in getattr(a, k).split(",")] for k in SWEEP)))
    wanted = [w.strip() for w in a.products.split(",") if w.strip()]
    if a.split_k or a.tiles:
        rows = [r for m in a.rows.split(",") for r in (
            split_k_rows(C, int(m), dt, dev) if a.split_k else
            triton_large_rows(C, int(m), dt, dev, dims, wanted,
                              () if a.sustain else LARGE_CONFIGS, a.sustain))]
        print(f"\n{torch.cuda.get_device_name()} · {a.preset} · {a.dtype}\n")
        print(dict_table(rows))
        return
    rows = []
    for case in cases(C, D, a.vocab, dims, dt, dev):
        if wanted and not any(case[0].startswith(w) for w in wanted):
            continue
        for M in (int(m) for m in a.rows.split(",")):
            rows.append(run_case(case, M, dt, dev, grid if str(M) in a.sweep.split(",") else []))
            print(rows[-1], flush=True)
    print(f"\n{torch.cuda.get_device_name()} · {a.preset} (C={C}, LoRA {dims}, padded {D}) · "
          f"{a.dtype}\n")
    print(dict_table(rows))
    if not wanted:
        print()
        from server.model.kernels.gemv_triton import MAX_ROWS

        print(dict_table([pair_row(C, D, dims, int(m), dt, dev) for m in a.rows.split(",")
                          if int(m) <= MAX_ROWS]))
    if a.large:
        print()
        print(dict_table(large_rows(C, dt, dev)))


if __name__ == "__main__":
    main()
