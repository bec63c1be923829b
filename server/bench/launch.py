"""Host time of a single-sequence prefill pass (a cached chat turn's), against its device time.

    python -m server.bench launch --preset 2.9b --tokens 158     # (CUDA: the prefill graphs)

The pass runs as the scheduler runs it (``RWKV7.prefill`` of one sequence: its CUDA graph for the
token count's bucket, captured first), ``--repeat`` times after a warm-up. Per pass: the host
time of the ``prefill`` call (the host goes on while the device works: no synchronisation), the
host time of the graph's ``replay()`` alone, on an idle device (the launch of every kernel
node), and the device time from an event recorded before the call to one recorded after it (the
pass, plus any time the device waited for the host to submit it)."""

from __future__ import annotations

import argparse
import statistics
import time

from server.model.presets import PRESETS
import torch

from server.bench import common


def measure(model, tokens: int, repeat: int) -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    toks = torch.randint(1, model.cfg.vocab_size, (tokens,), generator=gen).tolist()
    state = model.new_state(1)
    for _ in range(3):  # capture and warm up
        model.prefill([toks], state, logits=True)
    common.sync(model.device)
    graphs = getattr(model, "_graphed_prefill", None)
    graph = graphs.graphs.get(graphs.bucket(tokens)) if graphs is not None else None
    replay = graph.graph.replay if graph is not None and graph.graph is not None else None
    rows = []
    for _ in range(repeat):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        t0 = time.perf_counter()
        model.prefill([toks], state, logits=True)
        host = time.perf_counter() - t0
        end.record()
        torch.cuda.synchronize()
        row = dict(call_ms=host * 1e3, device_ms=start.elapsed_time(end))
        if replay is not None:  # the launch alone, on an idle device
            t0 = time.perf_counter()
            replay()
            row["replay_ms"] = (time.perf_counter() - t0) * 1e3
            torch.cuda.synchronize()
        rows.append(row)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m server.bench launch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="2.9b", choices=PRESETS)
    ap.add_argument("--tokens", default="158", help="comma-separated token counts")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("needs CUDA (the prefill graphs)")
    model = common.build_model(args.preset)
    print(f"# launch · {args.preset} · {common.gpu_name()} · median (min-max) of {args.repeat}")
    print("| tokens | prefill call, host ms | replay alone, host ms | call's start to the pass's "
          "end, device ms |")
    print("|---|---|---|---|")
    for n in (int(t) for t in args.tokens.split(",")):
        rows = measure(model, n, args.repeat)

        def cell(key: str) -> str:
            xs = [r[key] for r in rows if key in r]
            if not xs:
                return "-"
            return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"

        print(f"| {n} | {cell('call_ms')} | {cell('replay_ms')} | {cell('device_ms')} |",
              flush=True)


if __name__ == "__main__":
    main()
