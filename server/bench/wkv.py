"""WKV-7 kernel micro-benchmark and GPU correctness check (run on the GPU machine).

    python -m server.bench.wkv            # tables: decode step and prefill, 2.9B shape (H = 40)
    python -m server.bench.wkv --only prefill --shapes 1x190   # a cached chat turn's pass
    python -m server.bench.wkv --only prefill --shapes 1x160 --graph   # ... timed as run
    python -m server.bench.wkv --check    # Triton vs fp64 reference on random inputs (CUDA)
    TRITON_INTERPRET=1 python -m server.bench.wkv --check --small   # on the CPU (interpreter)

Decode figures are per call of one layer's step, timed as CUDA-graph replays of 32 layers'
calls on 32 distinct state tensors (what the engine does; keeps small states from living in L2).
GB/s counts S read + written plus the six input vectors and y.
"""

import argparse
import functools
import sys

import torch

from server.bench import common
from server.model import kernels
from server.model.kernels import check
from server.model.kernels import wkv_triton as wt
from server.model.kernels.wkv_torch import wkv_chunk_ref

H, N, LAYERS = 40, 64, 32
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def _graph_time_us(fn, reps: int = 20) -> float:
    """Median µs of one replay of a CUDA graph capturing fn()."""
    times = common.replay_us(common.cuda_graph(fn), reps)
    return times[len(times) // 2]


def bench_decode(B: int, state: str, **cfg) -> tuple[float, float]:
    """(µs per layer call, GB/s) for one decode step at batch B."""
    S = (torch.randn(LAYERS, B, H, N, N, device="cuda") * 0.5).to(DTYPES[state])
    xs = [x[:, 0] for x in check.random_inputs(B, 1, H, torch.float16, "cuda")]

    def run():
        for layer in range(LAYERS):
            wt.wkv_step_triton(S[layer], *xs, **cfg)

    us = _graph_time_us(run) / LAYERS
    nbytes = 2 * S[0].numel() * S.element_size() + 7 * B * H * N * 2
    return us, nbytes / us * 1e-3


DECODE_CFGS = [{}, {"rows": 16, "warps": 1}, {"rows": 16, "warps": 2}, {"rows": 32, "warps": 2},
               {"rows": 64, "warps": 8}]


def decode_table() -> None:
    print("\n## decode step, H=40 (per layer call; graph replay of 32 layers)")
    print("| B | state | config | µs/call | GB/s |")
    print("|---|---|---|---|---|")
    for B in (1, 32, 256, 1024):
        for state in ("fp32", "fp16"):
            for cfg in DECODE_CFGS:
                try:
                    us, gbs = bench_decode(B, state, **cfg)
                except Exception as e:  # keep the rest of the table
                    print(f"| {B} | {state} | {cfg} | failed: {e!r:.200} | |", flush=True)
                    continue
                print(f"| {B} | {state} | {cfg or 'auto'} | {us:.2f} | {gbs:.0f} |", flush=True)
            torch.cuda.empty_cache()


PREFILL_VARIANTS = [("chunk", {}), ("chunk", {"precision": "ieee"}), ("chunk", {"precision": "tf32"}),
                    ("chunk", {"rows": 16}), ("chunk", {"rows": 16, "precision": "tf32"}),
                    ("chunk", {"rows": 8}), ("chunk", {"rows": 16, "precision": "ieee"}),
                    ("chunk", {"rows": 64}), ("chunk", {"warps": 8}), ("chunk", {"chunk": 32}),
                    ("mixed", {"prep": "tf32x3", "scan": "tf32"}),
                    ("mixed", {"prep": "tf32", "scan": "tf32x3"}), ("prep", {}), ("seq", {}),
                    ("prep", {"warps": 2}), ("prep", {"warps": 8}),
                    ("prep", {"inv_precision": "ieee"}), ("prep", {"inv_precision": "tf32"}),
                    ("prep_cfg", {"warps": 2}), ("prep_cfg", {"warps": 8}),
                    ("prep_cfg", {"inv_precision": "ieee"}),
                    ("prep_cfg", {"inv_precision": "tf32"})]


def _prep_only(S, *xs, **cfg):
    """The chunked form's first (parallel) kernel alone, for the time split."""
    return wt.chunk_prep(*xs, **cfg)


def _prep_cfg(S, *xs, **prep):
    """The chunked form with the prep kernel launched otherwise (``chunk_prep``'s options:
    warps, the inverse's precision); the scan as served."""
    return wt.chunk_scan(S, wt.chunk_prep(*xs, **prep), xs[0].shape[1], xs[0].dtype)


def _mixed(S, *xs, prep: str, scan: str):
    """The chunked form with its two kernels' products at different precisions."""
    return wt.chunk_scan(S, wt.chunk_prep(*xs, precision=prep), xs[0].shape[1], xs[0].dtype,
                         precision=scan)


def prefill_table(shapes=((1, 4096), (64, 512)), graph: bool = False) -> None:
    from triton.testing import do_bench
    print("\n## prefill, H=40, fp16 inputs (one layer call; err = max rel err of y vs fp64 ref)")
    print("| B | T | state | kernel | config | ms/layer | Mtok/s per layer "
          "| ktok/s for 32 layers | err y |")
    print("|---|---|---|---|---|---|---|---|---|")
    fns = {"chunk": wt.wkv_chunk_triton, "seq": wt.wkv_seq_triton, "prep": _prep_only,
           "mixed": _mixed, "prep_cfg": _prep_cfg,
           "wkv_chunk": lambda S, *xs: kernels.wkv_chunk(S, *xs)}
    for B, T in shapes:
        xs = check.random_inputs(B, T, H, torch.float16, "cuda")
        for state in ("fp32", "fp16"):
            S0 = check.random_state(B, H, DTYPES[state], "cuda")
            y64 = wkv_chunk_ref(S0.double(), *(x.double() for x in xs))
            variants = PREFILL_VARIANTS if state == "fp32" else [("chunk", {}), ("seq", {})]
            variants = [("wkv_chunk", {})] + variants
            for name, cfg in variants:
                fn = fns[name]
                try:
                    y = fn(S0.clone(), *xs, **cfg)
                    err = check.max_rel_err(y, y64) if name != "prep" else float("nan")
                    if graph:  # 32 layers' calls (own states) replayed from a CUDA graph
                        Ss = [S0.clone() for _ in range(LAYERS)]
                        ms = _graph_time_us(lambda: [fn(S, *xs, **cfg) for S in Ss]) / LAYERS
                        ms /= 1e3
                    else:
                        S = S0.clone()
                        ms = do_bench(lambda: fn(S, *xs, **cfg), warmup=50, rep=300,
                                      return_mode="median")
                except Exception as e:  # keep the rest of the table
                    print(f"| {B} | {T} | {state} | {name} | {cfg} | failed: {e!r:.200} |",
                          flush=True)
                    continue
                tps = B * T / ms * 1e3
                print(f"| {B} | {T} | {state} | {name} | {cfg or 'auto'} | {ms:.3f} | "
                      f"{tps / 1e6:.2f} | {tps / LAYERS / 1e3:.1f} | {err:.1e} |", flush=True)


def run_checks(device: str, small: bool) -> bool:
    """Every kernel against the fp64 reference; prints one row per case, returns all-ok."""
    Bs, Ts, Hh = ((1, 2), (1, 5, 20), 2) if small else ((1, 3, 64), (1, 7, 64, 300), 4)
    cases = []
    for B in Bs:
        for T in Ts:
            for sd, xd in ((torch.float32, torch.float32), (torch.float16, torch.float16),
                           (torch.float32, torch.bfloat16)):
                if T == 1:
                    cases.append((wt.wkv_step_triton, "step", B, T, sd, xd, True))
                cases.append((wt.wkv_seq_triton, "seq", B, T, sd, xd, False))
                cases.append((wt.wkv_chunk_triton, "chunk", B, T, sd, xd, False))
            for name, cfg in (("chunk-ieee", {"precision": "ieee"}), ("chunk32", {"chunk": 32})):
                cases.append((functools.partial(wt.wkv_chunk_triton, **cfg), name, B, T,
                              torch.float32, torch.float32, False))
            for name, cfg in (("prep-inv-ieee", {"inv_precision": "ieee"}),
                              ("prep-warps2", {"warps": 2})):
                cases.append((functools.partial(_prep_cfg, **cfg), name, B, T,
                              torch.float32, torch.float32, False))
    ok = True
    print("| case | max rel err y | max rel err S | ok |\n|---|---|---|---|")
    for fn, name, B, T, sd, xd, step in cases:
        res = check.check_case(fn, name, B, T, Hh, sd, xd, device, step=step, seed=B * 1000 + T)
        ok &= res.ok
        print(f"| {res.name} | {res.err_y:.2e} | {res.err_s:.2e} | {res.ok} |", flush=True)
    return ok


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="correctness against fp64 reference")
    p.add_argument("--small", action="store_true", help="with --check: few small cases")
    p.add_argument("--only", choices=("decode", "prefill"), help="one table only")
    p.add_argument("--shapes", default="1x4096,64x512",
                   help="prefill table: BxT cases (e.g. 1x190 for a cached chat turn's pass)")
    p.add_argument("--graph", action="store_true", help="prefill table: time 32 layers' calls "
                   "replayed from a CUDA graph (as a pass runs them; short prompts' launch costs "
                   "otherwise dominate)")
    args = p.parse_args()
    if args.check:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        sys.exit(0 if run_checks(device, args.small) else 1)
    print(f"# WKV kernels on {torch.cuda.get_device_name()}, torch {torch.__version__}")
    if args.only != "prefill":
        decode_table()
    if args.only != "decode":
        prefill_table([tuple(map(int, c.split("x"))) for c in args.shapes.split(",")], args.graph)


if __name__ == "__main__":
    main()
