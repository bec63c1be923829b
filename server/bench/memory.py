"""Where a served process's device memory goes: python -m server.bench memory [options].

Builds the runtime as ``run.py`` does (the model, the scheduler with its prefix cache, the
warm-up: every graph captured, the throwaway requests) with PyTorch's allocation history on,
then sorts the allocator's live blocks by the line in ``server/`` that made them (the innermost
frame there), and prints them beside the totals: allocated, the graphs' private pools,
reserved and the device's memory in use (nvidia-smi's figure), split into the CUDA context
(measured before anything else is loaded), PyTorch's reservation and the rest (libraries' own
allocations, kernel images). CUDA only, on the current device (RWKV_DEVICE=auto), which no
other process may use meanwhile (its memory would count in the rest).

    python -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from pathlib import Path

MIB = 2**20


def where(frames: list[dict]) -> str:
    """The innermost frame inside the repository's ``server/`` package (``file:line function``),
    else the innermost frame; "(no stack)" without frames (allocated before the history)."""
    for f in frames:
        name = f.get("filename", "")
        if "/server/" in name and "/bench/" not in name:
            return f"server/{name.split('/server/', 1)[1]}:{f.get('line')} {f.get('name')}"
    if frames:
        f = frames[0]
        return f"{f.get('filename')}:{f.get('line')} {f.get('name')}"
    return "(no stack)"


def breakdown(snapshot: dict) -> dict:
    """Live bytes by allocating line (``by_line``: {line: [bytes, blocks]}), bytes of live
    blocks in CUDA graphs' private pools (``pools``), and the segments' reserved bytes."""
    by_line: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    pools = reserved = allocated = 0
    for seg in snapshot.get("segments", []):
        reserved += seg.get("total_size", 0)
        private = tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0)
        for block in seg.get("blocks", []):
            if block.get("state") != "active_allocated":
                continue
            size = block.get("size", 0)
            allocated += size
            pools += size if private else 0
            entry = by_line[where(block.get("frames", []))]
            entry[0] += size
            entry[1] += 1
    return {"by_line": dict(by_line), "pools": pools, "reserved": reserved,
            "allocated": allocated}


def report(b: dict, top: int) -> str:
    lines = sorted(b["by_line"].items(), key=lambda kv: -kv[1][0])
    rows = [f"| {line} | {size / MIB:,.1f} | {n} |" for line, (size, n) in lines[:top]]
    if len(lines) > top:
        rest = sum(size for _, (size, _) in lines[top:])
        rows.append(f"| ({len(lines) - top} other lines) | {rest / MIB:,.1f} | |")
    return "\n".join(["| allocated at | MiB | blocks |", "|---|---|---|", *rows,
                      f"\nlive blocks {b['allocated'] / MIB:,.1f} MiB (of them in CUDA graphs' "
                      f"private pools {b['pools'] / MIB:,.1f}); segments reserved "
                      f"{b['reserved'] / MIB:,.1f} MiB"])


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m server.bench memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--demo", default="2.9b", help="random weights of this preset (default 2.9b)")
    p.add_argument("--max-batch", type=int, default=256, help="RWKV_MAX_BATCH_SIZE (256)")
    p.add_argument("--state-dtype", default="fp16", choices=("fp32", "fp16", "bf16"))
    p.add_argument("--state-cache-mb", type=int, default=1024, help="RWKV_STATE_CACHE_MB")
    p.add_argument("--top", type=int, default=25, help="lines listed (25)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    from server.api.lifecycle import build_runtime, close_runtime
    from server.config import Settings
    from server.model.memory import describe, device_memory

    if not torch.cuda.is_available():
        raise SystemExit("server.bench memory needs CUDA")
    dev = torch.device("cuda", torch.cuda.current_device())  # (the model's: RWKV_DEVICE=auto)
    torch.zeros(1, device=dev)  # the CUDA context alone, before anything else is loaded
    first = device_memory(dev, wait=True)
    context = first["used"] - first["reserved"]  # (less the 2 MiB segment of that tensor)
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=200_000)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(demo=args.demo, max_batch_size=args.max_batch,
                            state_dtype=args.state_dtype, state_cache_mb=args.state_cache_mb,
                            task_db_path=str(Path(tmp) / "tasks.db"))
        rt = build_runtime(settings)
        try:
            torch.cuda.synchronize()
            mem = device_memory(rt.loader.model.device, wait=True)
            print(f"{args.demo}, max batch {args.max_batch}, {args.state_dtype} state, prefix "
                  f"cache {args.state_cache_mb} MB, after the warm-up: {describe(mem)}\n")
            print(report(breakdown(torch.cuda.memory._snapshot()), args.top))
            print(f"device in use {mem['used'] / MIB:,.0f} MiB: the CUDA context alone "
                  f"{context / MIB:,.0f} (measured first), PyTorch's reserved "
                  f"{mem['reserved'] / MIB:,.0f}, the rest (libraries' own allocations, kernel "
                  f"images loaded since) {(mem['used'] - context - mem['reserved']) / MIB:,.0f}")
        finally:
            close_runtime(rt)


if __name__ == "__main__":
    main()
