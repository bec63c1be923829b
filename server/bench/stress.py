"""The seed's stress test, driving the scheduler directly (no HTTP).

    python -m server.bench.stress --preset 2.9b --tasks 256 --max-tokens 2000 --buffer-size 32
    python -m server.bench.stress --model path/to/rwkv7.pth --tasks 64
    python -m server.bench stress --preset 2.9b      # the same, through server.bench

Random weights (``--preset``, default tiny) are generated in memory on the device. Before the
clock starts the kernels are compiled and the decode graphs captured (``--warmup 0``: not).

N tasks with long prompts are submitted at once to a ``DynamicScheduler`` (or one after another,
``--arrivals-per-s``, to its daemon); a progress bar runs
while they generate; then the seed's report is printed: input/output tokens, total and output
throughput, average output per task, the peak pulse, and every resize with its time.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from server.bench import common
from server.model.presets import PRESETS

ROOT = Path(__file__).resolve().parents[2]


def build_prompts(n: int) -> list[str]:
    """``n`` long chat prompts cut from few_shot.txt (or a fallback text)."""
    path = ROOT / "few_shot.txt"
    text = path.read_text(encoding="utf-8") if path.exists() else "The quick brown fox. " * 400
    blocks = [b.strip() for b in text.split("<|endoftext|>") if b.strip()] or [text]
    prompts = []
    for i in range(n):
        body = "\n\n".join(blocks[(i + j) % len(blocks)] for j in range(1 + i % 3))
        prompts.append(f"{body}\n\nUser: Please write a long, detailed story #{i}.\n\nAssistant:")
    return prompts


def load(args):
    """The checkpoint ``--model``, or random weights of ``--preset`` built in memory."""
    if args.model is not None:
        from server.model.loader import RWKV070ModelLoader

        return RWKV070ModelLoader(args.model, device=args.device, dtype=args.dtype,
                                  state_dtype=args.state_dtype)
    from server.bench.common import BenchLoader, build_model, default_device

    device = args.device or default_device()
    dtype = args.dtype or ("fp16" if device.startswith("cuda") else "fp32")
    model = build_model(args.preset, device, dtype, args.state_dtype or "fp32")
    return BenchLoader(model, f"random-{args.preset}")


def warm_up(sched, loader) -> float:
    """What a server does before taking traffic: compile the kernels (a short job of two tasks)
    and capture the decode graph of every capacity. Returns the seconds it took."""
    t0 = time.perf_counter()
    prompt = loader.encode("User: warm up the kernels, please.\n\nAssistant:") * 40
    for n_tasks, length in ((1, 257), (6, 300)):  # one long prompt, then a batch of them
        for i in range(n_tasks):
            sched.new_task(prompt[: length + i], max_tokens=8, temperature=1.0, seed=i)
        sched.run()
    sched.engine.capture_graphs(sched.max_batch_size)
    sched.pulses.clear()
    sched.resizes.clear()
    return time.perf_counter() - t0


def progress(done: int, total: int, out_tokens: int, t0: float) -> None:
    width = 30
    fill = int(width * done / max(total, 1))
    rate = out_tokens / max(time.perf_counter() - t0, 1e-9)
    sys.stderr.write(f"\r [{'#' * fill}{'.' * (width - fill)}] {done}/{total} tasks "
                     f"{out_tokens:,} tok {rate:,.0f} tok/s")
    sys.stderr.flush()


def run(args) -> dict:
    from server.scheduler import DynamicScheduler

    loader = load(args)
    sched = DynamicScheduler(loader, max_batch_size=args.max_batch_size, buffer_size=args.buffer_size)
    sched.ramp_gap = args.ramp_gap
    common.apply_copyback(sched.engine, args.copyback_mb)
    if args.admit_wait is not None:
        sched.admit_wait = args.admit_wait
    warm = warm_up(sched, loader) if args.warmup else 0.0
    graphed = getattr(loader.model, "_graphed", None)
    n_captures = len(graphed.captures) if graphed is not None else 0
    unload0 = list(sched.engine.unload_stats)
    prompts = build_prompts(args.tasks)
    prompt_tokens = [loader.encode(p) for p in prompts]
    t0 = time.perf_counter()
    tasks, finished = [], threading.Semaphore(0)
    sent, first = {}, {}  # task -> when it was submitted, when its first tokens came

    def submit(i: int) -> None:
        sent[i] = time.perf_counter()
        tasks.append(sched.new_task(prompt_tokens[i], max_tokens=args.max_tokens,
                                    temperature=args.temperature, top_p=args.top_p,
                                    top_k=args.top_k, seed=i,
                                    collect_callback=lambda _, i=i: first.setdefault(
                                        i, time.perf_counter()),
                                    finish_callback=lambda _: finished.release()))

    def past_deadline() -> bool:
        return bool(args.deadline) and time.perf_counter() - t0 > args.deadline

    def why_stopped() -> str:
        return "Ctrl-C" if interrupted else f"the --deadline of {args.deadline:g} s"

    stopped, worker, interrupted = False, None, False
    if args.arrivals_per_s > 0:  # one task every 1 / rate seconds, beside the daemon
        sched.start_daemon()
        gap = 1.0 / args.arrivals_per_s
        try:
            for i in range(len(prompt_tokens)):
                time.sleep(max(0.0, t0 + i * gap - time.perf_counter()))
                if past_deadline():
                    break  # the rest are never submitted
                submit(i)
        except KeyboardInterrupt:  # Ctrl-C while tasks arrive: as below, the rest never come
            interrupted = True
    else:  # all at once (the seed's test)
        for i in range(len(prompt_tokens)):
            submit(i)
        worker = threading.Thread(target=sched.run, daemon=True, name="stress-run")
        worker.start()
    done, shown = 0, t0
    while done < len(tasks):
        try:
            if finished.acquire(timeout=0.5):  # (returns as soon as a task finishes)
                done += 1
            elif worker is not None and not worker.is_alive():
                break  # run() ended with tasks unfinished (it raised): report what was done
        except KeyboardInterrupt:  # Ctrl-C: stop, then report what was done (it left the run
            interrupted = True  # thread inside torch at exit: the process aborted, 134)
        if (interrupted or past_deadline()) and not stopped:
            stopped = why_stopped()
            for t in tasks:  # (report what was done rather than nothing)
                t.stop()
        if time.perf_counter() - shown >= 0.5:  # the progress bar, twice a second
            shown = time.perf_counter()
            progress(done, len(tasks), sum(len(t.output) for t in tasks), t0)
    seconds = time.perf_counter() - t0
    if args.arrivals_per_s > 0:
        sched.shutdown()
    if worker is not None:  # (a daemon thread still inside torch at exit aborted the process)
        worker.join(60)
    sys.stderr.write("\n")
    n_in = sum(len(prompt_tokens[i]) for i in range(len(tasks)))
    n_out = sum(len(t.output) for t in tasks)
    peak = max(sched.pulses, key=lambda p: p["tokens"] / p["seconds"], default=None)
    unload = [a - b for a, b in zip(sched.engine.unload_stats, unload0)]
    captures = graphed.captures[n_captures:] if graphed is not None else []
    steps = sum(p["steps"] for p in sched.pulses) / max(len(sched.pulses), 1)
    if len(tasks) < len(prompt_tokens) and not stopped:  # (before every task had arrived)
        stopped = why_stopped()
    return dict(loader=loader, tasks=len(tasks), n_in=n_in, n_out=n_out, seconds=seconds,
                peak=peak, resizes=list(sched.resizes), memory=device_memory(loader),
                warm=warm, unload=unload, captures=captures, pulses=len(sched.pulses),
                steps=steps, stopped=stopped,
                ttft=sorted(first[i] - sent[i] for i in first))


def device_memory(loader) -> str:
    import torch

    if torch.device(loader.model.device).type == "cuda":
        return (f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GB "
                f"({torch.cuda.memory_reserved() / 2**30:.1f} GB reserved)")
    return "n/a (CPU)"


def report(r: dict, args) -> str:
    peak = r["peak"]
    lines = [
        " RWKV stress test",
        f" model: {r['loader'].name} · device: {r['loader'].model.device} · tasks: {r['tasks']}"
        f" · peak memory: {r['memory']}",
        "─" * 60,
        f" input tokens:  {r['n_in']:>10,}    output tokens: {r['n_out']:>10,}",
        f" total:  {(r['n_in'] + r['n_out']) / r['seconds']:>10,.0f} tok/s"
        f"    output: {r['n_out'] / r['seconds']:>10,.0f} tok/s",
        f" average output per task: {r['n_out'] / max(r['tasks'], 1):,.0f} tokens"
        f" · wall time {r['seconds']:.2f} s",
        "─" * 60,
    ]
    if peak:
        speed = peak["tokens"] / peak["seconds"]
        lines.append(f" peak: Iter {peak['iter']} cap={peak['cap']} active={peak['active']} "
                     f"speed={speed:.2f} tok/s per_task={speed / max(peak['active'], 1):.2f} tok/s")
        lines.append(f" whole-run output throughput = {r['n_out'] / r['seconds'] / speed:.0%} of peak")
    for z in r["resizes"]:
        lines.append(f" resize {z['frm']:>4} -> {z['to']:<4} ({z['tasks']} tasks) {z['ms']:.1f} ms")
    lines.append("─" * 60)
    if r["stopped"]:
        lines.append(f" STOPPED at {r['stopped']}: unfinished tasks "
                     f"were stopped ({r['tasks']} of {args.tasks} submitted)")
    lines.append(f" warm-up before the clock: {r['warm']:.1f} s (kernels, decode graphs) · "
                 f"pulses: {r['pulses']}, {r['steps']:.1f} steps each on average")
    ttft = r["ttft"]
    if ttft:
        q = lambda f: ttft[min(len(ttft) - 1, int(f * len(ttft)))] * 1e3  # noqa: E731
        lines.append(f" time to first token (submitted -> first tokens' callback), ms: "
                     f"median {q(0.5):,.0f} · p90 {q(0.9):,.0f} · max {ttft[-1] * 1e3:,.0f}")
    lines.append(f" state copy-back: {common.copyback_text(r['unload'])}"
                 f" · graph captures during the run: {len(r['captures'])}"
                 f" ({sum(ms for _, ms in r['captures']):.0f} ms)")
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="checkpoint .pth (default: random weights of --preset)")
    p.add_argument("--preset", default="tiny", choices=PRESETS, help="random-weights preset when no --model")
    p.add_argument("--tasks", type=int, default=256)
    p.add_argument("--max-tokens", type=int, default=2000)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=0.3)
    p.add_argument("--top-k", type=int, default=50)
    p.add_argument("--buffer-size", type=int, default=32)
    common.copyback_option(p)
    p.add_argument("--max-batch-size", type=int, default=256)
    p.add_argument("--device", default=None, type=common.device_arg)
    p.add_argument("--dtype", default=None, choices=common.DTYPES)
    p.add_argument("--state-dtype", default=None, choices=common.DTYPES)
    p.add_argument("--deadline", type=float, default=0,
                   help="seconds after which every task is stopped and the report printed")
    p.add_argument("--warmup", type=int, default=1,
                   help="1: compile kernels and capture graphs before the clock starts")
    p.add_argument("--ramp-gap", type=int, default=0,
                   help="decode steps between two pulse ramps while tasks decode (0: every "
                        "start ramps the pulses from 1 step, as the server does)")
    p.add_argument("--admit-wait", type=int, default=None,
                   help="decode steps a pulse runs at most once a task that fits is waiting "
                        "(the scheduler's admit_wait; 0: the whole pulse)")
    p.add_argument("--arrivals-per-s", type=float, default=0,
                   help="submit the tasks one after another at this rate (a stream of "
                        "arrivals) instead of all at once")
    return p.parse_args(argv)


def main(argv=None) -> None:
    from server.logger import setup_logging

    args = parse_args(argv)
    setup_logging(verbose=True)  # (run as its own module: the server's format, at INFO)
    print(report(run(args), args))


if __name__ == "__main__":
    main()
