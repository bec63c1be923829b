"""The seed's stress test, driving the scheduler directly (no HTTP).

    python -m server.bench.stress --preset 2.9b --tasks 256 --max-tokens 2000 --buffer-size 32
    python -m server.bench.stress --model path/to/rwkv7.pth --tasks 64

N tasks with long prompts are submitted at once to a ``DynamicScheduler``; a progress bar runs
while they generate; then the seed's report is printed: input/output tokens, total and output
throughput, average output per task, the peak pulse, and every resize with its time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

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
    from server.model.loader import RWKV070ModelLoader

    path = args.model
    if path is None:
        from server.model.random import main as make_random

        path = str(Path(tempfile.mkdtemp()) / f"random-{args.preset}.pth")
        make_random([path, "--preset", args.preset])
    return RWKV070ModelLoader(path, device=args.device, dtype=args.dtype, state_dtype=args.state_dtype)


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
    prompts = build_prompts(args.tasks)
    prompt_tokens = [loader.encode(p) for p in prompts]
    t0 = time.perf_counter()
    tasks = [sched.new_task(toks, max_tokens=args.max_tokens, temperature=args.temperature,
                            top_p=args.top_p, top_k=args.top_k, seed=i)
             for i, toks in enumerate(prompt_tokens)]
    worker = threading.Thread(target=sched.run)
    worker.start()
    while worker.is_alive():
        worker.join(0.5)
        progress(sum(t.is_finished for t in tasks), len(tasks),
                 sum(len(t.output) for t in tasks), t0)
    seconds = time.perf_counter() - t0
    sys.stderr.write("\n")
    n_in = sum(map(len, prompt_tokens))
    n_out = sum(len(t.output) for t in tasks)
    peak = max(sched.pulses, key=lambda p: p["tokens"] / p["seconds"], default=None)
    return dict(loader=loader, tasks=len(tasks), n_in=n_in, n_out=n_out, seconds=seconds,
                peak=peak, resizes=list(sched.resizes), memory=device_memory(loader))


def device_memory(loader) -> str:
    import torch

    if torch.device(loader.model.device).type == "cuda":
        return f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GB"
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
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="checkpoint .pth (default: random weights of --preset)")
    p.add_argument("--preset", default="tiny", help="random-weights preset when no --model")
    p.add_argument("--tasks", type=int, default=256)
    p.add_argument("--max-tokens", type=int, default=2000)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=0.3)
    p.add_argument("--top-k", type=int, default=50)
    p.add_argument("--buffer-size", type=int, default=32)
    p.add_argument("--max-batch-size", type=int, default=256)
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--state-dtype", default=None)
    return p.parse_args(argv)


def main(argv=None) -> None:
    from server.logger import setup_logging

    args = parse_args(argv)
    setup_logging(verbose=True)
    print(report(run(args), args))


if __name__ == "__main__":
    main()
