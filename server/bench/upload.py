"""Host time of a small upload (a request's slot indices or parameters) to the device, the ways
the engine could make it (run on the GPU machine):

    python -m server.bench upload                  # 2,000 calls each, median of 5 rounds

* pageable: ``torch.tensor(values).to(cuda, non_blocking=True)`` (waits for the device's queue:
  shown with nothing queued);
* pin_memory: ``torch.tensor(values).pin_memory().to(cuda, non_blocking=True)`` (what
  ``server.model.state.to_device`` does);
* pinned_empty: ``torch.empty(n, pin_memory=True)`` (a block of the pinned allocator), filled
  with ``copy_`` from the host tensor, then copied (skips ``pin_memory()``'s ``is_pinned``);
* is_pinned: ``Tensor.is_pinned()`` of a pageable tensor alone (what ``pin_memory()`` asks first).
Host microseconds per call, measured with a device kernel queued (the scheduler's case: the
upload is made while a pass runs) and with an idle device."""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from server.bench import common


def per_call_us(fn, calls: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def pinned_empty(vals: list[int], dev) -> torch.Tensor:
    t = torch.tensor(vals)
    staged = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    staged.copy_(t)
    return staged.to(dev, non_blocking=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.bench upload", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--values", type=int, default=4, help="list length")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("needs CUDA")
    dev = torch.device("cuda")
    vals = list(range(args.values))
    ways = {
        "pageable": lambda: torch.tensor(vals).to(dev, non_blocking=True),
        "pin_memory": lambda: torch.tensor(vals).pin_memory().to(dev, non_blocking=True),
        "pinned_empty": lambda: pinned_empty(vals, dev),
        "is_pinned": lambda: torch.tensor(vals).is_pinned(),
    }
    big = torch.randn(8192, 8192, device=dev)
    rows = []
    for name, fn in ways.items():
        fn()
        idle = per_call_us(fn, args.calls, args.rounds)
        busy = []
        for _ in range(args.rounds):
            big @ big  # ~1 ms of device work queued ahead of the uploads
            busy.append(per_call_us(fn, args.calls // 10, 1))
        torch.cuda.synchronize()
        rows.append([name, f"{statistics.median(busy):.1f}" if name != "pageable" else "(waits)",
                     f"{idle:.1f}"])
    print(f"# upload of {args.values} ints · {common.gpu_name()}")
    print(common.table(["way", "host µs a call, device busy", "device idle"], rows), flush=True)


if __name__ == "__main__":
    main()
