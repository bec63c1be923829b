"""A fresh server's first requests: does anything compile on the clock after the warm-up?

    python -m server.bench first --demo tiny      # on the GPU machine (CUDA; Triton compiles)
    python -m server.bench first --demo 2.9b --no-warm-requests   # as before session 22

Loads random weights of ``--demo``, runs the server's warm-up (``lifecycle.warm_up``: the
graphs, then ``BatchEngine.warm_requests``) with Triton's cache in a new empty directory, then
one request after another through the scheduler (the SDK, no HTTP): each case's wall time and
the kernel variants Triton compiled for it (new ``.cubin`` files in the cache). A variant
compiled in a request costs it 1-7 s on the H200 (session 22)."""

from __future__ import annotations

import argparse
import glob
import os
import tempfile
import time

CASES = [  # (name, prompts at once, sampling)
    ("four equal prompts, greedy", 4, dict(temperature=0.0)),
    ("chat defaults", 1, dict(temperature=1.0, top_p=0.3, top_k=50, presence_penalty=0.5,
                              penalty_decay=0.996)),
    ("four prompts, Task API defaults", 4, dict(temperature=1.0, top_p=0.3, top_k=50,
                                                presence_penalty=2.0)),
    ("Task API defaults", 1, dict(temperature=1.0, top_p=0.3, top_k=50, presence_penalty=2.0)),
    ("top_k 5, top_p 0.9", 1, dict(temperature=1.0, top_p=0.9, top_k=5)),
    ("greedy", 1, dict(temperature=0.0)),
    ("top_p 0.5", 1, dict(temperature=0.8, top_p=0.5, top_k=0)),
    ("top_k 200", 1, dict(temperature=0.8, top_p=1.0, top_k=200)),
    ("top_k 2000", 1, dict(temperature=0.8, top_p=1.0, top_k=2000)),
]


def compiled(cache: str) -> set[str]:
    return set(glob.glob(f"{cache}/*/*.cubin"))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.bench first", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--demo", default="tiny", help="random-weights preset")
    p.add_argument("--max-batch-size", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--no-warm-requests", action="store_true",
                   help="the graphs' warm-up only (the throwaway requests skipped)")
    args = p.parse_args(argv)
    cache = tempfile.mkdtemp(prefix="rwkv-triton-cache-")
    os.environ["TRITON_CACHE_DIR"] = cache  # before Triton compiles anything

    from server.api.lifecycle import load_model, warm_up
    from server.config import Settings
    from server.scheduler import DynamicScheduler

    loader = load_model(Settings(demo=args.demo))
    sched = DynamicScheduler(loader, args.max_batch_size, 32)
    if args.no_warm_requests:
        sched.engine.warm_requests = lambda: 0
    t0 = time.perf_counter()
    warm_up(sched, args.max_batch_size)
    seen = compiled(cache)
    print(f"warm-up {time.perf_counter() - t0:.1f} s, {len(seen)} kernel variants compiled")
    print("| request | ms | variants compiled in it |\n|---|---|---|")
    for name, n, params in CASES:
        t = time.perf_counter()
        for i in range(n):
            sched.new_task(f"Once upon a time ({i})", max_tokens=args.max_tokens, **params)
        sched.run()
        ms = (time.perf_counter() - t) * 1e3
        new = compiled(cache) - seen
        seen |= new
        names = sorted(os.path.basename(f).split(".")[0] for f in new)
        print(f"| {name} | {ms:.1f} | {len(new)} {' '.join(names)} |", flush=True)
    sched.shutdown()


if __name__ == "__main__":
    main()
