"""Where a served process's device memory goes: python -m server.bench memory [options].

Builds the runtime as ``run.py`` does (the model, the scheduler with its prefix cache, the
warm-up: every graph captured, the throwaway requests) with PyTorch's allocation history on,
then sorts the allocator's live blocks by the line in ``server/`` that made them (the innermost
frame there), and prints them beside the totals: allocated, the graphs' private pools,
reserved and the device's memory in use (nvidia-smi's figure), split into the CUDA context
(measured before anything else is loaded), PyTorch's reservation and the rest (libraries' own
allocations, kernel images). CUDA only, on the current device (RWKV_DEVICE=auto), which no
other process may use meanwhile (its memory would count in the rest).

``--load N`` then serves N requests at once through the started scheduler (the seed's long
prompts, each of ``engine.WARM_SAMPLING``'s sampling variants in turn, the penalties on) and
prints the memory after them, the peak allocated while they ran and, at that peak, the blocks
allocated since the load began by line: what serving adds to the start's figure.

    python -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16
    python -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 --load 256
    python -m server.bench memory --model path/to/rwkv7.pth --load 64
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
    blocks in CUDA graphs' private pools (``pools``), and the segments' reserved bytes (those
    of the graphs' pools: ``pools_reserved``, their free blocks kept for the graphs' replays).
    ``small``: [segments, reserved, live bytes] of the allocator's small-block segments (blocks
    up to 1 MiB; a segment goes back only when none of its blocks is live: session 63 found 25
    of them holding ~65 MiB for ~5 MiB live after a 2.9B server's start). ``small_by``: the
    same by pool and stream ({"general stream 0": [segments, reserved, live, {line: live}]})."""
    by_line: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    pools = reserved = allocated = pools_reserved = 0
    small_by: dict[str, list] = {}
    for seg in snapshot.get("segments", []):
        reserved += seg.get("total_size", 0)
        private = tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0)
        pools_reserved += seg.get("total_size", 0) if private else 0
        group = None
        if seg.get("segment_type") == "small":
            key = f"{'graph pool' if private else 'general'} stream {seg.get('stream', 0)}"
            group = small_by.setdefault(key, [0, 0, 0, defaultdict(int)])
            group[0] += 1
            group[1] += seg.get("total_size", 0)
        for block in seg.get("blocks", []):
            if block.get("state") != "active_allocated":
                continue
            size = block.get("size", 0)
            allocated += size
            pools += size if private else 0
            line = where(block.get("frames", []))
            if group is not None:
                group[2] += size
                group[3][line] += size
            entry = by_line[line]
            entry[0] += size
            entry[1] += 1
    small = [sum(g[i] for g in small_by.values()) for i in range(3)]
    return {"by_line": dict(by_line), "pools": pools, "reserved": reserved,
            "allocated": allocated, "pools_reserved": pools_reserved, "small": small,
            "small_by": small_by}


def peak_since(trace: list[dict], marker: int, base: int) -> dict:
    """The peak of allocated bytes after the allocation at address ``marker`` (its last
    ``alloc`` in the allocator's ``trace``; ``base``: the bytes live then, in the trace's unit:
    bytes requested, ``requested_live``), and the blocks allocated after the marker that were
    live at that peak, by line (``by_line`` as in ``breakdown``). A block is live from its
    ``alloc`` to its ``free_completed``."""
    start = max((n for n, e in enumerate(trace)
                 if e.get("action") == "alloc" and e.get("addr") == marker), default=None)
    if start is None:
        raise ValueError("the marker's allocation is not in the trace (it wrapped: record "
                         "more entries)")
    events = trace[start + 1:]

    def replay(stop: int):
        live, total, best, at = {}, base, base, -1
        for n, e in enumerate(events[:stop]):
            action = e.get("action")
            if action == "alloc":
                live[e["addr"]] = (e.get("size", 0), where(e.get("frames", [])))
                total += e.get("size", 0)
            elif action == "free_completed":
                size = live.pop(e["addr"], (e.get("size", 0), ""))[0]
                total -= size  # (a block from before the marker: counted in base)
            if total > best:
                best, at = total, n
        return live, best, at

    _, best, at = replay(len(events))
    live = replay(at + 1)[0] if at >= 0 else {}
    by_line: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for size, line in live.values():
        by_line[line][0] += size
        by_line[line][1] += 1
    return {"peak": best, "by_line": dict(by_line), "allocated": sum(s for s, _ in live.values())}


STACK_LIMIT = 0  # the driver's CU_LIMIT_STACK_SIZE
STACK_DEFAULT = 1024  # bytes a thread: the limit a new context has


def local_memory_probe(device, lib=None) -> str:
    """The context's per-thread stack limit, which the driver raises to what the largest kernel
    launched needs (spilled registers, local arrays) and backs with local memory for every
    thread the device can hold; then the device memory given back when the limit is set to its
    default (the next launch that needs more takes it again). Part of the "rest" above
    PyTorch's reservation; a line for the report (what the driver does not answer, said)."""
    import ctypes

    import torch

    try:
        cuda = lib or ctypes.CDLL("libcuda.so.1")
        limit = ctypes.c_size_t()
        with torch.cuda.device(device):  # (the driver calls act on the current context)
            before = torch.cuda.mem_get_info(device)[0]  # (makes the device's context current)
            if (err := cuda.cuCtxGetLimit(ctypes.byref(limit), STACK_LIMIT)) != 0:
                return f"stack limit: the driver did not answer (error {err})"
            if (err := cuda.cuCtxSetLimit(STACK_LIMIT, ctypes.c_size_t(STACK_DEFAULT))) != 0:
                return (f"stack limit {limit.value:,} bytes a thread (not lowered: error "
                        f"{err})")
            freed = torch.cuda.mem_get_info(device)[0] - before
    except (OSError, AttributeError) as e:
        return f"stack limit: no driver library ({e})"
    return (f"stack limit {limit.value:,} bytes a thread; set to {STACK_DEFAULT:,}: "
            f"{freed / MIB:,.1f} MiB given back")


def triton_local_sizes() -> list[tuple[int, int, str]]:
    """``(local bytes a thread, registers a thread, name)`` of every compiled Triton kernel of
    ``server.model.kernels`` that uses local memory, largest first. Triton reads the local
    size from the driver when it loads a kernel and keeps it, in 4-byte words, as ``n_spills``;
    its internals are read defensively ([] where they differ)."""
    import importlib
    import pkgutil

    import server.model.kernels as pkg
    from triton.runtime.jit import JITFunction

    found = []
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for fn in vars(module).values():
            while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):  # (autotune,
                fn = fn.fn  # heuristics wrappers, possibly nested)
            if not isinstance(fn, JITFunction):
                continue
            for entry in getattr(fn, "device_caches", {}).values():
                for kernel in entry[0].values():
                    words = getattr(kernel, "n_spills", 0) or 0
                    if words > 0:
                        found.append((4 * words, getattr(kernel, "n_regs", -1),
                                      getattr(kernel, "name", fn.__name__)))
    return sorted(found, reverse=True)


def load_tasks(n: int) -> list[dict]:
    """``n`` requests for ``--load``: the stress bench's prompts, the sampling variants in
    turn, every fourth with the presence and repetition penalties."""
    from server.bench.stress import build_prompts
    from server.scheduler.engine import WARM_SAMPLING

    reqs = []
    for i, text in enumerate(build_prompts(n)):
        params = dict(WARM_SAMPLING[i % len(WARM_SAMPLING)])
        if i % 4 == 3:
            params.update(presence_penalty=0.5, repetition_penalty=0.3, penalty_decay=0.99)
        reqs.append(dict(prompt=text, seed=i, **params))
    return reqs


def run_load(scheduler, n: int, max_tokens: int, timeout: float = 600.0) -> int:
    """Serve ``load_tasks(n)`` at once on the running daemon; the output tokens made."""
    import threading

    done = threading.Semaphore(0)
    tasks = [scheduler.new_task(max_tokens=max_tokens, finish_callback=lambda _: done.release(),
                                **req) for req in load_tasks(n)]
    for _ in tasks:
        if not done.acquire(timeout=timeout):
            raise SystemExit(f"--load: a request did not finish in {timeout:g} s")
    return sum(len(t.output) for t in tasks)


def table(by_line: dict, top: int) -> str:
    """``by_line`` ({line: [bytes, blocks]}) as a Markdown table, largest first."""
    lines = sorted(by_line.items(), key=lambda kv: -kv[1][0])
    rows = [f"| {line} | {size / MIB:,.1f} | {n} |" for line, (size, n) in lines[:top]]
    if len(lines) > top:
        rest = sum(size for _, (size, _) in lines[top:])
        rows.append(f"| ({len(lines) - top} other lines) | {rest / MIB:,.1f} | |")
    return "\n".join(["| allocated at | MiB | blocks |", "|---|---|---|", *rows])


def report(b: dict, top: int) -> str:
    return (f"{table(b['by_line'], top)}\n\nlive blocks {b['allocated'] / MIB:,.1f} MiB (of "
            f"them in CUDA graphs' private pools {b['pools'] / MIB:,.1f}); segments reserved "
            f"{b['reserved'] / MIB:,.1f} MiB (of them the graphs' pools' "
            f"{b['pools_reserved'] / MIB:,.1f}; {b['small'][0]} small-block segments "
            f"{b['small'][1] / MIB:,.1f}, live in them {b['small'][2] / MIB:,.1f})"
            + "".join(f"\n  small-block segments, {key}: {n}, {size / MIB:,.1f} MiB, live "
                      f"{live / MIB:,.2f} (most: " + ", ".join(
                          f"{line} {v / MIB:,.2f}" for line, v in sorted(
                              lines.items(), key=lambda kv: -kv[1])[:3]) + ")"
                      for key, (n, size, live, lines) in b.get("small_by", {}).items()))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m server.bench memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--demo", default="2.9b", help="random weights of this preset (default 2.9b)")
    p.add_argument("--model", default=None, help="a checkpoint (an RWKV-7 .pth) instead of "
                   "--demo's random weights")
    p.add_argument("--max-batch", type=int, default=256, help="RWKV_MAX_BATCH_SIZE (256)")
    p.add_argument("--state-dtype", default="fp16", choices=("fp32", "fp16", "bf16"))
    p.add_argument("--state-cache-mb", type=int, default=1024, help="RWKV_STATE_CACHE_MB")
    p.add_argument("--top", type=int, default=25, help="lines listed (25)")
    p.add_argument("--load", type=int, default=0, metavar="N",
                   help="then serve N requests at once and report the peak (default 0: none)")
    p.add_argument("--load-tokens", type=int, default=64, help="tokens each generates (64)")
    p.add_argument("--prefill-tokens", type=int, default=0, help="tokens a batched "
                   "prefill pass holds at most (RWKV_PREFILL_TOKENS; default: as served, 16384)")
    p.add_argument("--copyback-mb", type=int, default=0, help="MiB of finished states "
                   "gathered on the device at most (RWKV_COPYBACK_MB; default: as served, 256)")
    return p.parse_args(argv)


def served_options(args) -> dict:
    """The settings ``--prefill-tokens`` and ``--copyback-mb`` give (0: as served)."""
    given = {"prefill_tokens": args.prefill_tokens, "copyback_mb": args.copyback_mb}
    return {name: value for name, value in given.items() if value}


def main(argv=None) -> None:
    args = parse_args(argv)
    import os

    from server.config import BLAS_DEFAULTS, Settings, cuda_defaults

    CUDA_VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", *BLAS_DEFAULTS)

    cuda_defaults(os.environ)  # as run.py serves (before any CUDA allocation)
    import torch

    from server.api.lifecycle import build_runtime, close_runtime
    from server.model.memory import describe, device_memory

    if args.prefill_tokens and args.prefill_tokens < 32:
        raise SystemExit("--prefill-tokens: at least 32 (RWKV_PREFILL_TOKENS), or 0: as served")
    if args.copyback_mb < 0:
        raise SystemExit("--copyback-mb: at least 1 (RWKV_COPYBACK_MB), or 0: as served")
    if not torch.cuda.is_available():
        raise SystemExit("server.bench memory needs CUDA")
    dev = torch.device("cuda", torch.cuda.current_device())  # (the model's: RWKV_DEVICE=auto)
    torch.zeros(1, device=dev)  # the CUDA context alone, before anything else is loaded
    first = device_memory(dev, wait=True)
    context = first["used"] - first["reserved"]  # (less the 2 MiB segment of that tensor)
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=1_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        weights = dict(model_path=args.model, demo=None) if args.model else dict(demo=args.demo)
        settings = Settings(**weights, **served_options(args), max_batch_size=args.max_batch,
                            state_dtype=args.state_dtype, state_cache_mb=args.state_cache_mb,
                            task_db_path=str(Path(tmp) / "tasks.db"))
        rt = build_runtime(settings)
        try:
            torch.cuda.synchronize()
            mem = device_memory(rt.loader.model.device, wait=True)
            print(f"{args.model or args.demo}, max batch {args.max_batch}, {args.state_dtype} "
                  f"state, prefix cache {args.state_cache_mb} MB, "
                  + ", ".join(f"{v}={os.environ.get(v)!r}" for v in CUDA_VARIABLES)
                  + ", after the warm-up: "
                  f"{describe(mem)}\n")
            print(report(breakdown(torch.cuda.memory._snapshot()), args.top))
            print(f"device in use {mem['used'] / MIB:,.0f} MiB: the CUDA context alone "
                  f"{context / MIB:,.0f} (measured first), PyTorch's reserved "
                  f"{mem['reserved'] / MIB:,.0f}, the rest (libraries' own allocations, kernel "
                  f"images loaded since) {(mem['used'] - context - mem['reserved']) / MIB:,.0f}")
            if args.load:
                print(serve_load(rt, args))
            try:
                sizes = triton_local_sizes()
            except Exception as e:  # (a diagnostic: never the bench's failure)
                sizes = f"not read ({e!r:.100})"
            print(f"Triton kernels with local memory (bytes a thread, registers a thread, "
                  f"name): {sizes[:8] if isinstance(sizes, list) else sizes}")
            print(local_memory_probe(dev))  # (last: it changes the context's limit)
        finally:
            close_runtime(rt)


def serve_load(rt, args) -> str:
    """``--load``'s run and its report."""
    import time

    import torch

    from server.model.memory import describe, device_memory

    dev = rt.loader.model.device
    index = dev.index or 0
    torch.cuda.synchronize(dev)
    # (in the trace's unit, as its entries count: bytes requested, not the rounded blocks)
    base = requested_live(torch.cuda.memory._snapshot(), index)
    marker = torch.empty(1, device=dev)  # the trace's mark of where the load begins
    torch.cuda.reset_peak_memory_stats(dev)
    gave = rt.scheduler._idle_trim.gave_back  # (the idle daemon's give-backs so far)
    t0 = time.perf_counter()
    made = run_load(rt.scheduler, args.load, args.load_tokens)
    seconds = time.perf_counter() - t0
    torch.cuda.synchronize(dev)
    mem = device_memory(dev, wait=True)
    head = (f"\nafter a load of {args.load} requests ({made:,} tokens made in {seconds:.1f} s): "
            f"{describe(mem)}; peak during the load: allocated "
            f"{torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB, reserved "
            f"{torch.cuda.max_memory_reserved(dev) / 2**30:.2f}")
    try:
        peak = peak_since(torch.cuda.memory._snapshot()["device_traces"][index],
                          marker.data_ptr(), base)
    except ValueError as e:  # (the figures above need no trace)
        return f"{head}\nno split of the peak: {e}\n{after_idle(rt, gave)}"
    return "\n".join([
        f"{head} (the trace's, in bytes requested: {peak['peak'] / 2**30:.2f})",
        f"\nat that peak, live blocks allocated since the load began "
        f"({peak['allocated'] / MIB:,.1f} MiB requested):", table(peak["by_line"], args.top),
        after_idle(rt, gave)])


def after_idle(rt, gave: int) -> str:
    """The device memory once the idle daemon has given the cached blocks back (idle_trim.py;
    ``gave``: its count of give-backs before the load)."""
    import time

    from server.model.memory import describe, device_memory
    from server.scheduler.idle_trim import IDLE_S

    trim, t0 = rt.scheduler._idle_trim, time.monotonic()
    while trim.gave_back == gave and time.monotonic() - t0 < IDLE_S + 5:
        time.sleep(0.05)
    if trim.gave_back == gave:
        return f"\nno idle give-back within {IDLE_S + 5:g} s"
    return (f"\nonce idle, the cached blocks given back (waited {time.monotonic() - t0:.1f} s "
            f"more): {describe(device_memory(rt.loader.model.device, wait=True))}")


def requested_live(snapshot: dict, device: int) -> int:
    """Bytes requested by the live blocks of ``device`` in an allocator snapshot (what the
    trace's entries count; a block's ``size`` is the rounded one)."""
    return sum(block.get("requested_size", block.get("size", 0))
               for seg in snapshot.get("segments", []) if seg.get("device", device) == device
               for block in seg.get("blocks", []) if block.get("state") == "active_allocated")


if __name__ == "__main__":
    main()
