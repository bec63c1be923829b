"""Session 63: where a served 2.9B's device memory above the floors goes after the start.

Builds the runtime's model, scheduler and prefix cache as ``server.api.lifecycle`` does
(expandable segments as run.py sets them), records each CUDA-graph capture's effect on
PyTorch's reservation and on the rest of the device's memory in use (used - reserved: the
context, libraries, kernel images and, the question here, instantiated graphs), then lists the
general pool's free blocks and what dropping the graphs and ``empty_cache`` give back.

    python3 docs/experiments/session63/rest_split.py [--demo 2.9b] [--max-batch 256]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
MIB = 2**20


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--demo", default="2.9b")
    p.add_argument("--max-batch", type=int, default=256)
    p.add_argument("--share-pool", action="store_true",
                   help="the prefill graphs captured into the decode graphs' pool (6d64359, "
                   "reverted; served: a pool each)")
    p.add_argument("--graph-tokens", type=int, default=0,
                   help="the longest prefill graph (the model's prefill_chunk; 0: as served)")
    p.add_argument("--coarse", action="store_true",
                   help="prefill buckets every 32 tokens up to 512 (served: every 16 up to 256)")
    args = p.parse_args()
    from server.config import Settings, default_allocator

    default_allocator(os.environ)
    import torch

    from server.api import lifecycle
    from server.model import cuda_graph

    dev = torch.device("cuda", torch.cuda.current_device())

    def reading():
        torch.cuda.synchronize(dev)
        free, total = torch.cuda.mem_get_info(dev)
        return total - free, torch.cuda.memory_reserved(dev)

    torch.zeros(1, device=dev)
    used0, res0 = reading()
    print(f"context: used {used0 / MIB:,.0f} MiB, reserved {res0 / MIB:,.0f}")
    rows = []

    def wrap(cls, kind, size_of):
        inner = cls._capture

        def _capture(self, *a, **kw):
            u0, r0 = reading()
            out = inner(self, *a, **kw)
            u1, r1 = reading()
            rows.append((kind, size_of(a), (r1 - r0) / MIB, ((u1 - r1) - (u0 - r0)) / MIB))
            return out
        cls._capture = _capture

    wrap(cuda_graph.GraphedDecode, "decode", lambda a: a[0].shape[0])
    wrap(cuda_graph.GraphedPrefill, "prefill", lambda a: a[0].tokens.shape[1])

    with tempfile.TemporaryDirectory() as tmp:
        s = Settings(demo=args.demo, max_batch_size=args.max_batch, state_dtype="fp16",
                     task_db_path=str(Path(tmp) / "t.db"))
        t0 = time.perf_counter()
        loader = lifecycle.load_model(s)
        u, r = reading()
        print(f"model loaded ({time.perf_counter() - t0:.1f} s): used {u / MIB:,.0f}, reserved "
              f"{r / MIB:,.0f}, rest above context {(u - r - (used0 - res0)) / MIB:,.0f} MiB")
        from server.scheduler import DynamicScheduler

        sch = DynamicScheduler(loader, s.max_batch_size, s.buffer_size, prefill_chunk=None,
                               max_queue=s.max_queue,
                               prefix_cache=lifecycle.make_prefix_cache(s, loader))
        u, r = reading()
        print(f"scheduler built: used {u / MIB:,.0f}, reserved {r / MIB:,.0f}, rest "
              f"{(u - r - (used0 - res0)) / MIB:,.0f} MiB")
        model = loader.model
        if args.share_pool:  # (the decode graphs are captured first, in capture_graphs)
            inner = model.capture_prefill_graphs

            def capture_prefill_graphs():
                model._graphed_prefill.pool = model._graphed.pool
                return inner()
            model.capture_prefill_graphs = capture_prefill_graphs
        if args.graph_tokens:  # (a multiple of the model's prefill_align; experiment only)
            model.prefill_chunk = model._graphed_prefill.max_tokens = args.graph_tokens
        if args.coarse:
            model._graphed_prefill.FINE = ((512, 32),)
        lifecycle.warm_up(sch, s.max_batch_size)
        ids = {"decode": model._graphed.pool, "prefill": model._graphed_prefill.pool}
        print(f"pools: {ids} (share_pool={args.share_pool})")
        u, r = reading()
        print(f"after warm-up: used {u / MIB:,.0f}, reserved {r / MIB:,.0f}, rest "
              f"{(u - r - (used0 - res0)) / MIB:,.0f} MiB")
        print("\n| capture | tokens/rows | Δreserved MiB | Δrest MiB |\n|---|---|---|---|")
        for kind, n, dr, drest in rows:
            print(f"| {kind} | {n} | {dr:.1f} | {drest:.1f} |")
        tot = Counter()
        for kind, _, dr, drest in rows:
            tot[kind, "res"] += dr
            tot[kind, "rest"] += drest
        print(f"sums: {dict(tot)}")

        snap = torch.cuda.memory._snapshot()
        free_sizes = Counter()
        seg_rows = []
        for seg in snap["segments"]:
            pool = tuple(seg.get("segment_pool_id", (0, 0)))
            fb = [b["size"] for b in seg["blocks"] if b["state"] != "active_allocated"]
            seg_rows.append((pool != (0, 0), seg["segment_type"], seg["total_size"],
                             seg["allocated_size"], sum(fb), len(fb), max(fb, default=0)))
            for sz in fb:
                free_sizes[(pool != (0, 0), sz // MIB)] += 1
        by_pool = {}
        for seg in snap["segments"]:
            pid = tuple(seg.get("segment_pool_id", (0, 0)))
            row = by_pool.setdefault(pid, [0, 0, 0])
            row[0] += seg["total_size"]
            row[1] += seg["allocated_size"]
            row[2] += 1
        for pid, (tt, al, n) in sorted(by_pool.items()):
            names = [k for k, v in ids.items() if v is not None and tuple(v) == pid] or ["general"]
            print(f"pool {pid} {'+'.join(names)}: reserved {tt / MIB:,.1f} MiB, allocated "
                  f"{al / MIB:,.1f}, {n} segments")
        streams = Counter()
        for seg in snap["segments"]:
            key = (seg.get("stream", "?"), seg.get("segment_type", "?"))
            streams[key] += 1
        print("segments by (stream, type): "
              + ", ".join(f"{k[0]:#x}/{k[1]}: {n}" if isinstance(k[0], int) else f"{k}: {n}"
                          for k, n in sorted(streams.items(), key=lambda kv: -kv[1])))
        print("\nsegments (private, type, total MiB, allocated MiB, free MiB, free blocks, "
              "largest free MiB), by free bytes:")
        for row in sorted(seg_rows, key=lambda x: -x[4])[:25]:
            pv, st, tt, al, fr, nf, mx = row
            print(f"  {pv!s:5} {st:5} {tt / MIB:9.1f} {al / MIB:9.1f} {fr / MIB:8.1f} {nf:5} "
                  f"{mx / MIB:8.1f}")
        print(f"  ({len(seg_rows)} segments)")

        before = reading()
        torch.cuda.empty_cache()
        u, r = reading()
        print(f"\nempty_cache: used {(u - before[0]) / MIB:+,.0f} MiB, reserved "
              f"{(r - before[1]) / MIB:+,.0f}")
        gp = model._graphed_prefill
        before = reading()
        n = len(gp.graphs)
        gp.graphs.clear()
        gp.pool = None
        gc.collect()
        torch.cuda.empty_cache()
        u, r = reading()
        print(f"dropped {n} prefill graphs (+ empty_cache): used {(u - before[0]) / MIB:+,.0f} "
              f"MiB, reserved {(r - before[1]) / MIB:+,.0f}, rest "
              f"{((u - r) - (before[0] - before[1])) / MIB:+,.0f}")
        before = reading()
        n = len(model._graphed.graphs)
        model._graphed.clear()
        gc.collect()
        torch.cuda.empty_cache()
        u, r = reading()
        print(f"dropped {n} decode graphs (+ empty_cache): used {(u - before[0]) / MIB:+,.0f} "
              f"MiB, reserved {(r - before[1]) / MIB:+,.0f}, rest "
              f"{((u - r) - (before[0] - before[1])) / MIB:+,.0f}")
        print(f"final: used {u / MIB:,.0f}, reserved {r / MIB:,.0f}, allocated "
              f"{torch.cuda.memory_allocated(dev) / MIB:,.0f}, rest "
              f"{(u - r - (used0 - res0)) / MIB:,.0f} MiB above the context")
        sch.shutdown()


if __name__ == "__main__":
    main()
