"""Prefill benchmark: prompts fed into fresh slots, then the first token sampled.

    python -m server.bench prefill --preset 2.9b                 # 1 x 4096 and 64 x 512 tokens
    python -m server.bench prefill --preset 2.9b --cases 1x4096 --repeat 5
    python -m server.bench prefill --cases 1x152 --scheduler 0 --profile 152 --gemv-rows 256

Two ways for each case (random token ids):
* engine: ``BatchEngine.prefill`` of every prompt at once, then ``pulse(1)``; prefill tokens/s
  and time to first token (prefill + first step), cold (first run: kernel compilation, graph
  capture) and warm (median of the others);
* scheduler: the prompts submitted together to a ``DynamicScheduler`` (``max_tokens=1``), as a
  server runs them (its prefill budget per step: 4,096 tokens on CUDA, 512 on the CPU, or
  ``--prefill-chunk``), after a server's warm-up (as many
  short tasks, then every capacity's decode graph captured); time to first token per task, from
  submission to the callback of its first token (mean and max), and prompt tokens/s overall.
"Of FLOP": the FLOPs the pass does (``common.pass_flops``: 2 x the layers' matmul parameters
and the WKV recurrence per token; the head only where it runs: not in the engine's prefill,
which keeps no logits, once a prompt through the scheduler) over 790 TFLOP/s, divided by the
measured time.
"""

from __future__ import annotations

import argparse
import statistics
import time

from server.model.presets import PRESETS
import torch

from server.bench import common


def random_prompts(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(100, vocab, (n, length), generator=g).tolist()


def engine_case(model, n: int, length: int, repeat: int) -> dict:
    from server.scheduler.engine import BatchEngine

    dev = model.device
    engine = BatchEngine(model)
    engine.resize(n, [])
    slots = list(range(n))
    runs = []
    for rep in range(repeat):
        prompts = random_prompts(n, length, model.cfg.vocab_size, rep)
        engine.load(slots, [common.DummyTask(seed=i) for i in slots])
        t_pre, _ = common.timed(lambda: engine.prefill(slots, [p[:-1] for p in prompts]), dev)
        engine.start(slots, [p[-1] for p in prompts], [1] * n)
        t_step, _ = common.timed(lambda: engine.pulse(1), dev)
        runs.append((t_pre, t_pre + t_step))
    mem = common.memory()
    engine = None  # (freed before the next case; `del` reads as unbound in the lambdas)
    model.clear_graphs()
    warm = runs[1:] or runs
    t_pre = statistics.median(r[0] for r in warm)
    ttft = statistics.median(r[1] for r in warm)
    return dict(cold=runs[0], t_pre=t_pre, ttft=ttft, tokens=n * (length - 1), mem=mem)


def _timed_steps(sched) -> list[dict]:
    """Wrap ``sched``'s step and its engine's prefill and pulse (instance attributes) to time
    each step: host ms of the prefill call (on CUDA its launches: the pass runs on after it),
    of the pulse (it waits for the device: the pass's rest and the decode step) and of the rest
    of the step (admission, release: the copy-back's gathers, bookkeeping)."""
    steps: list[dict] = []
    engine, step = sched.engine, sched.step

    def timing(key, fn):
        def wrapped(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if steps:
                    steps[-1][key] = steps[-1].get(key, 0.0) + time.perf_counter() - t
        return wrapped

    def timed_step():
        steps.append({})
        t = time.perf_counter()
        try:
            return step()
        finally:
            steps[-1]["step"] = time.perf_counter() - t

    engine.prefill = timing("prefill", engine.prefill)
    engine.pulse = timing("pulse", engine.pulse)
    sched.step = timed_step
    return steps


def step_lines(steps: list[dict], copyback: list) -> str:
    """The per-step table of ``--detail`` (ms) and the copy-back thread's total."""
    rows = [[i + 1, *(f"{s.get(k, 0.0) * 1e3:.1f}" for k in ("step", "prefill", "pulse")),
             f"{(s.get('step', 0.0) - s.get('prefill', 0.0) - s.get('pulse', 0.0)) * 1e3:.1f}"]
            for i, s in enumerate(steps)]
    return (common.table(["step", "ms", "prefill call", "pulse call", "rest"], rows)
            + f"\ncopy-back thread: {common.copyback_text(copyback)}")


def scheduler_case(model, n: int, length: int, seed: int = 99, detail: bool = False,
                   prefill_chunk: int | None = None) -> dict:
    from server.scheduler import DynamicScheduler

    sched = DynamicScheduler(common.BenchLoader(model, "bench"), max_batch_size=max(n, 1),
                             buffer_size=32, prefill_chunk=prefill_chunk)
    # warm-up, as a server's: n short tasks compile the kernels at n rows, then the decode graph
    # of every capacity is captured (its state addresses are this scheduler's). Without the
    # latter the capacities the run shrinks through as prompts finish (n/2, n/4, ...) were
    # captured inside the timed run (session 15: a suspect for 64 x 512's slow figure)
    for i, p in enumerate(random_prompts(n, 16, model.cfg.vocab_size, seed + 1)):
        sched.new_task(p, max_tokens=1, seed=i)
    sched.run()
    sched.engine.capture_graphs(sched.max_batch_size)
    graphed = getattr(model, "_graphed", None)
    n_captures = len(graphed.captures) if graphed is not None else 0
    prompts = random_prompts(n, length, model.cfg.vocab_size, seed)
    first: dict[int, float] = {}

    def on_tokens(i):
        return lambda toks: first.setdefault(i, time.perf_counter())

    common.sync(model.device)
    steps = _timed_steps(sched) if detail else []
    copied = list(sched.engine.unload_stats)  # the warm-up's
    t0 = time.perf_counter()
    for i, p in enumerate(prompts):
        sched.new_task(p, max_tokens=1, temperature=1.0, top_p=0.3, top_k=50, seed=i,
                       collect_callback=on_tokens(i))
    sched.run()
    wall = time.perf_counter() - t0
    ttft = [first[i] - t0 for i in range(n) if i in first]
    detail_text = step_lines(steps, [a - b for a, b in zip(sched.engine.unload_stats, copied)]
                             ) if detail else ""
    captures = graphed.captures[n_captures:] if graphed is not None else []
    sched.shutdown()
    return dict(wall=wall, ttft_mean=statistics.mean(ttft), ttft_max=max(ttft),
                tokens=n * length, got=len(ttft), detail=detail_text, captures=captures,
                chunk=sched.prefill_chunk)


def profile_pass(model, length: int) -> str:
    """One sequence's prefill pass of ``length`` tokens: kernel time by kind (eager pass) and the
    time of the pass as the server runs it (a CUDA graph on CUDA; median of 5)."""
    from server.bench.profile import profile_eager, timeline

    state = model.new_state(1)
    tokens = random_prompts(1, length, model.cfg.vocab_size, 7)
    run = lambda: model.prefill(tokens, state, logits=False)  # noqa: E731
    run()  # compilation, graph capture
    times = [common.timed(run, model.device)[0] for _ in range(5)]
    report = profile_eager(model, run, 1, "µs/pass")
    return (f"\n### prefill pass, {length} tokens: {statistics.median(times) * 1e3:.2f} ms as run "
            f"(graph if CUDA), eager kernels below\n{report}\n\nthe pass as run:\n"
            f"{timeline(run, model.device, 1, 'pass')}\n")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.bench prefill", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="2.9b", choices=PRESETS)
    p.add_argument("--cases", default="1x4096,64x512", help="NxLEN,...")
    p.add_argument("--repeat", type=int, default=4)
    p.add_argument("--dtype", default="fp16", choices=common.DTYPES)
    p.add_argument("--state-dtype", default="fp32", choices=common.DTYPES)
    p.add_argument("--scheduler", type=int, default=1, help="0: engine only")
    p.add_argument("--prefill-chunk", default="", help="the scheduler case's prompt tokens a "
                   "step, comma-separated (each its own row; default: the scheduler's, by device)")
    p.add_argument("--device", default=None, type=common.device_arg)
    p.add_argument("--profile", default="", help="prompt lengths: profile one eager pass of each "
                   "(kernel time by kind) and time its graph pass")
    p.add_argument("--detail", action="store_true", help="the scheduler case step by step: "
                   "host ms of each step, of its prefill and pulse calls, and the copy-back "
                   "thread's busy time")
    common.product_options(p)
    args = p.parse_args(argv)
    model = common.build_model(args.preset, args.device, args.dtype, args.state_dtype)
    common.apply_product_options(model, args)
    for length in filter(None, args.profile.split(",")):
        print(profile_pass(model, int(length)), flush=True)
    print(f"# prefill · {args.preset} {model.dtype}, state {args.state_dtype} · prefill chunk "
          f"{model.prefill_chunk} · {common.gpu_name()}", flush=True)
    rows = []
    for case in args.cases.split(","):
        n, length = map(int, case.split("x"))
        r = engine_case(model, n, length, args.repeat)
        t_flop = common.pass_flops(model, r["tokens"], 0) / common.MATMUL_FLOPS  # (no logits)
        rows.append([f"{n} x {length}", "engine", f"{r['tokens'] / r['t_pre']:,.0f}",
                     f"{r['t_pre'] * 1e3:.1f}", f"{r['ttft'] * 1e3:.1f}",
                     f"{r['cold'][1] * 1e3:.0f}", f"{t_flop / r['t_pre']:.0%}",
                     f"{r['mem']['peak']:.2f}"])
        print(" ".join(rows[-1]), flush=True)
        for chunk in (args.prefill_chunk.split(",") if args.scheduler else []):
            s = scheduler_case(model, n, length, detail=args.detail,
                               prefill_chunk=int(chunk) if chunk else None)
            t_flop = common.pass_flops(model, s["tokens"], n) / common.MATMUL_FLOPS
            via = "scheduler" + (f" ({s['chunk']} a step)" if chunk else "")
            rows.append([f"{n} x {length}", via, f"{s['tokens'] / s['wall']:,.0f}",
                         f"{s['wall'] * 1e3:.1f} (all)",
                         f"{s['ttft_mean'] * 1e3:.1f} mean / {s['ttft_max'] * 1e3:.1f} max",
                         "", f"{t_flop / s['wall']:.0%}", ""])
            print(" ".join(rows[-1]), flush=True)
            if s["captures"]:  # a warm server has none
                print(f"{n} x {length} through the scheduler: {len(s['captures'])} graph "
                      f"captures during the run ({sum(ms for _, ms in s['captures']):.0f} ms)",
                      flush=True)
            if s["detail"]:
                print(f"\n### {n} x {length} through the scheduler, by step\n{s['detail']}\n",
                      flush=True)
    print(common.table(["prompts", "via", "prompt tok/s", "prefill ms", "TTFT ms (warm)",
                        "cold TTFT ms", "of FLOP", "peak GB"], rows), flush=True)


if __name__ == "__main__":
    main()
