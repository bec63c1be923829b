"""Decode benchmark: BatchEngine pulses (forward + sampling + end-of-generation bookkeeping, as
the scheduler runs them) with every slot live, on random weights.

    python -m server.bench decode --preset 2.9b --batch 1,32,256,1024 --state-dtype fp32,fp16
    python -m server.bench decode --preset 7.2b --batch 256 --fused 0      # an ablation

Per batch size: a first pulse (graph capture, kernel compilation) is timed apart, then
``--pulses`` pulses of ``--steps`` steps; the median pulse gives ms/step (over the steps it ran:
a pulse whose rows have all ended stops early) and tokens/s. Sampling is the stress test's
(temperature 1, top-p 0.3, top-k 50). Rows that end (a sampled EOS) are restarted between
pulses. Memory: peak allocated / reserved since the engine was made (the weights included).
Roofline (``common.roofline``): weights once, each row's embedding row and each slot's state
read and written, over 4.3 TB/s; 2 x matmul parameters (the head's included) + the WKV's 9 N²
a head, x batch, over 790 TFLOP/s; "of mem" / "of FLOP" = floor / measured.
"""

from __future__ import annotations

import argparse
import statistics
import time

from server.model.presets import PRESETS
import torch

from server.bench import common


def constrained_rows(tasks: list, count: int) -> None:
    """The first ``count`` of ``tasks`` under a grammar no reply ever completes (lowercase
    letters and spaces, one or more: end-of-text stays allowed after the first), so that a
    row restarted after an end goes on under it: what a pulse with constrained rows costs (a
    host read a step, masks computed and applied), not a grammar's own difficulty."""
    from server.model.tokenizer import Tokenizer
    from server.task.constraint import Constraint, lark_grammar

    grammar, tokenizer = lark_grammar("start: /[a-z ]+/\n"), Tokenizer()
    for task in tasks[:count]:
        task.constraint = Constraint(grammar, tokenizer)


def bench_batch(model, B: int, steps: int, pulses: int, profile: bool = False,
                timeline: bool = False, rest: float = 0.0, logprobs: int | None = None,
                constrained: int = 0, penalty_decay: float = 1.0) -> dict:
    from server.scheduler.engine import RUNNING, BatchEngine

    dev = model.device
    common.free_memory()
    engine = BatchEngine(model)
    engine.resize(B, [])
    slots = list(range(B))
    tasks = [common.DummyTask(seed=i, logprobs=logprobs, penalty_decay=penalty_decay)
             for i in slots]
    constrained_rows(tasks, constrained)
    engine.load(slots, tasks)
    gen = torch.Generator().manual_seed(B)
    current = torch.randint(100, model.cfg.vocab_size, (B,), generator=gen).tolist()
    engine.start(slots, current, [1 << 30] * B)
    first, res = common.timed(lambda: engine.pulse(steps), dev)
    times, tokens, ran = [], [], []
    for _ in range(pulses):
        ended = [i for i in slots if res.reason[i] != RUNNING]
        if ended:
            engine.start(ended, [1] * len(ended), [1 << 30] * len(ended))
        if rest:  # the GPU idle first: a pulse from a cool board (below its power limit)
            time.sleep(rest)
        dt, res = common.timed(lambda: engine.pulse(steps), dev)
        times.append(dt)
        tokens.append(sum(map(len, res.tokens)))
        ran.append(res.steps)  # (fewer than asked when every row ended: EndProbe)
    per_step = [t / max(n, 1) for t, n in zip(times, ran)]
    i = sorted(range(pulses), key=per_step.__getitem__)[pulses // 2]
    mem = common.memory()
    report = None
    if profile:
        from server.bench.profile import profile_pulse

        report = "eager step:\n" + profile_pulse(engine)
    if timeline:
        from server.bench.profile import timeline_pulse

        report = (report + "\n\n" if report else "") + "graph-run steps:\n" + \
            timeline_pulse(engine)
    engine = None  # (freed before the next case; `del` reads as unbound in the lambdas)
    model.clear_graphs()
    return dict(B=B, first=first, dt=times[i], tokens=tokens[i], steps=max(ran[i], 1), mem=mem,
                spread=(max(per_step) - min(per_step)) / statistics.median(per_step),
                profile=report)


def row(model, r: dict) -> list:
    step = r["dt"] / r["steps"]
    roof = common.roofline(model, r["B"])
    floor = max(roof["t_mem"], roof["t_flop"])
    return [r["B"], f"{step * 1e3:.3f}", f"{r['tokens'] / r['dt']:,.0f}",
            f"{floor * 1e3:.3f}", f"{roof['t_mem'] / step:.0%}", f"{roof['t_flop'] / step:.0%}",
            f"{r['mem']['peak']:.2f}", f"{r['mem']['reserved']:.2f}", f"{r['first']:.2f}",
            f"{r['spread']:.0%}"]


HEADER = ["batch", "ms/step", "tok/s", "floor ms", "of mem", "of FLOP", "peak GB", "reserved GB",
          "1st pulse s", "spread"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m server.bench decode", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="2.9b", choices=PRESETS)
    p.add_argument("--batch", default="1,32,256,1024")
    p.add_argument("--state-dtype", default="fp32", type=common.dtype_list, help="comma-separated: fp32,fp16")
    p.add_argument("--dtype", default="fp16", choices=common.DTYPES)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--pulses", type=int, default=4)
    p.add_argument("--rest", type=float, default=0.0, help="seconds the GPU idles before each "
                   "timed pulse (with few --steps: pulses too short for the power limit to act)")
    p.add_argument("--fused", type=int, default=1, help="0: plain torch element-wise ops")
    p.add_argument("--graphs", type=int, default=1, help="0: eager decode (no CUDA graph)")
    p.add_argument("--profile", default="", help="batch sizes to profile (eager, by kernel kind)")
    p.add_argument("--timeline", default="", help="batch sizes whose graph-run steps are "
                   "profiled: kernel time, span and the idle gaps between kernels")
    p.add_argument("--device", default=None, type=common.device_arg)
    p.add_argument("--time-mix", default="",
                   help="launch variants of the decode time mix above 16 rows, each timed in "
                        "the step: ';'-separated, e.g. ';num_warps=1;num_warps=1,HEADS=2,"
                        "STAGES=2' (empty: the server's launch)")
    p.add_argument("--end-probe", default="1",
                   help="comma-separated 1/0: the pulse reads its rows' end flags (EndProbe, "
                        "as served) or not (as before session 29); e.g. 1,0,1 alternates")
    p.add_argument("--logprobs", default="off",
                   help="comma-separated: every row's log probabilities with this many "
                        "alternatives (0-20), or off (as served without them); e.g. off,5")
    p.add_argument("--constrained", default="0",
                   help="comma-separated: how many rows decode under a grammar (constrained "
                        "decoding: a host read a step; constrained_rows), e.g. 0,1")
    p.add_argument("--penalty-decay", type=float, default=1.0,
                   help="every row's penalty_decay (1, the server's default, skips the "
                        "penalties' decay pass a step)")
    common.product_options(p)
    return p.parse_args(argv)


class _NoProbe:
    """``--end-probe 0``: a pulse that never reads its rows' end flags (no copies, no waits)."""

    buffers = None  # (EndProbe's, which the engine keeps for the next pulse: none here)

    def __init__(self, *args):
        pass

    def record(self) -> None:
        pass

    def ended(self) -> bool:
        return False


def parse_variant(text: str) -> dict:
    """``"num_warps=1,EVICT=evict_first,EARLY=True"`` -> launch options (ints, bools, strings)."""
    opts = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        opts[key.strip()] = (int(value) if value.strip().lstrip("-").isdigit() else
                             {"True": True, "False": False}.get(value.strip(), value.strip()))
    return opts


def compiled_resources(*kernels) -> list[str]:
    """Registers and spills of each compiled form of these Triton kernels (from Triton's
    per-device caches; what occupancy a launch variant had), one line each, deduplicated."""
    lines = []
    for fn in kernels:
        for cache in getattr(fn, "device_caches", {}).values():
            for k in list(cache[0].values()):
                try:
                    k._init_handles()
                    line = (f"{fn.__name__}: {k.metadata.num_warps} warps, {k.n_regs} registers,"
                            f" {k.n_spills} spills")
                except Exception as e:  # a Triton whose cache looks different
                    line = f"{fn.__name__}: resources unknown ({e!r:.80})"
                if line not in lines:
                    lines.append(line)
    return lines


def main(argv=None) -> None:
    args = parse_args(argv)
    model = common.build_model(args.preset, args.device, args.dtype, "fp32")
    if not args.fused:
        model._fused = None
    if not args.graphs:
        model._graphed = None
    common.apply_product_options(model, args)
    weights = common.memory()["alloc"]
    print(f"# decode · {args.preset} {model.dtype} weights ({weights:.2f} GB on the device) · "
          f"fused={args.fused} graphs={args.graphs} lora-stream={args.lora_stream} · "
          f"{common.gpu_name()}", flush=True)
    from server.model.kernels import decode_triton
    from server.scheduler import engine as engine_module
    from server.scheduler.probe import EndProbe

    runs = [(sd, v, probe, lp, int(k)) for sd in args.state_dtype.split(",")
            for v in args.time_mix.split(";") for probe in args.end_probe.split(",")
            for lp in args.logprobs.split(",") for k in args.constrained.split(",")]
    for sd, variant, probe, lp, constrained in runs:
        logprobs = None if lp.strip() == "off" else int(lp)
        model.state_dtype = common.DTYPES[sd]
        decode_triton.STEP_VARIANT = parse_variant(variant)
        engine_module.EndProbe = EndProbe if probe == "1" else _NoProbe
        rows = []
        print(f"\n## state {sd}, {args.steps} steps a pulse, median of {args.pulses} pulses"
              + (f" each after {args.rest:g} s idle" if args.rest else "")
              + (f", time mix {variant}" if variant else "")
              + (", end flags unread (--end-probe 0)" if probe != "1" else "")
              + (f", log probabilities with {logprobs} alternatives" if logprobs is not None
                 else "")
              + (f", {constrained} rows constrained (at most the batch)" if constrained
                 else "")
              + (f", penalty decay {args.penalty_decay:g}" if args.penalty_decay != 1 else ""),
              flush=True)
        for B in map(int, args.batch.split(",")):
            try:
                r = bench_batch(model, B, args.steps, args.pulses,
                                profile=str(B) in args.profile.split(","),
                                timeline=str(B) in args.timeline.split(","), rest=args.rest,
                                logprobs=logprobs, constrained=constrained,
                                penalty_decay=args.penalty_decay)
            except Exception as e:  # keep the other rows (e.g. out of memory)
                print(f"batch {B}: failed: {e!r:.300}", flush=True)
                continue
            rows.append(row(model, r))
            print(" ".join(map(str, rows[-1])), flush=True)
            if r["profile"]:
                print(f"\n### profile, batch {B}, state {sd}\n{r['profile']}\n",
                      flush=True)
        print(common.table(HEADER, rows), flush=True)
        if variant:
            print("\n".join(compiled_resources(decode_triton._decode_kernel)), flush=True)


if __name__ == "__main__":
    main()
