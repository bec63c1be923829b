"""The pulse that hands out a request's first token, in isolation.

    python -m server.bench pulse --preset 2.9b                # on the GPU machine
    python -m server.bench pulse --preset tiny --device cpu --dtype fp32

One slot (capacity 1): a greedy task is loaded, a prompt of ``--prompt`` tokens prefilled, and one
``BatchEngine.pulse(1)`` timed (device synchronised before; the pulse ends with its own copy to
the host), two ways: *merged* (the prompt's last token fed with the prefill, the first token
sampled from its logits: no model call in the pulse) and *decode step* (the last token fed by the
pulse's decode step). Median of ``--repeat``; then, with ``--profile``, each way once under
torch.profiler (operations by host time: what a pulse without a model call spends its time on).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

from server.model.presets import PRESETS
from server.bench import common


def pulse_ms(engine, prompt: list[int], merged: bool, around=contextlib.nullcontext) -> float:
    """Load, prefill and start the slot, then time ``pulse(1)`` (inside ``around()``)."""
    engine.load([0], [common.DummyTask(temperature=0.0)])
    engine.prefill([0], [prompt if merged else prompt[:-1]], first={0} if merged else ())
    engine.start([0], [prompt[-1]], [8])
    common.sync(engine.device)
    with around():
        t0 = time.perf_counter()
        engine.pulse(1)
        return (time.perf_counter() - t0) * 1e3


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.bench pulse", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="2.9b", choices=PRESETS)
    p.add_argument("--prompt", type=int, default=190, help="prompt tokens")
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--dtype", default="fp16", choices=common.DTYPES)
    p.add_argument("--state-dtype", default="fp32", choices=common.DTYPES)
    p.add_argument("--device", default=None, type=common.device_arg)
    p.add_argument("--profile", action="store_true", help="then each way under torch.profiler")
    args = p.parse_args(argv)
    from server.scheduler.engine import BatchEngine

    model = common.build_model(args.preset, args.device, args.dtype, args.state_dtype)
    engine = BatchEngine(model)
    engine.resize(1, [])
    prompt = list(range(1000, 1000 + args.prompt))
    ways = (("merged", True), ("decode step", False))
    rows = []
    for name, merged in ways:
        for _ in range(3):  # warm-up: compilation, graph capture
            pulse_ms(engine, prompt, merged)
        times = [pulse_ms(engine, prompt, merged) for _ in range(args.repeat)]
        rows.append([name, f"{statistics.median(times):.2f}", f"{min(times):.2f}"])
    print(f"# pulse · {args.preset} {model.dtype} · prompt {args.prompt} · {common.gpu_name()}")
    print(common.table(["first token", "pulse(1) ms, median", "min"], rows), flush=True)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                         if engine.device.type == "cuda" else [])
        for name, merged in ways:
            prof = profile(activities=acts)
            pulse_ms(engine, prompt, merged, around=lambda: prof)  # noqa: B023
            print(f"\n### {name}\n" + prof.key_averages().table(
                sort_by="cpu_time_total", row_limit=20, max_name_column_width=45), flush=True)


if __name__ == "__main__":
    main()
