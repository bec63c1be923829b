"""Where a decode step's GPU time goes: torch.profiler over one eager pulse (CUDA graphs off, so
every kernel is its own launch), kernel times summed by kind. Used by ``decode --profile``.

Kinds by kernel name: matmul (cuBLAS/CUTLASS), wkv (the Triton recurrence), fused (the Triton
element-wise kernels of fused.py), sampling (top-k, sort, scans, searchsorted) and other
(element-wise torch kernels, copies, indexing)."""

from __future__ import annotations

import torch

from server.bench import common

KINDS = (("matmul", ("gemm", "gemv", "cutlass", "nvjet", "sm90_", "cublas", "splitk")),
         ("wkv", ("_recurrent_kernel", "_chunk_")),
         ("fused", ("_ln_mix", "_pre_wkv", "_post_wkv")),
         ("sampling", ("topk", "sort", "scan", "searchsorted", "radix", "cumsum", "gather")))


def kind_of(name: str) -> str:
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def profile_pulse(engine, steps: int = 8) -> str:
    """Profile ``steps`` eager decode steps of ``engine`` (slots live); a report of µs/step."""
    from torch.profiler import ProfilerActivity, profile

    model = engine.model
    graphed, model._graphed = model._graphed, None
    try:
        engine.pulse(2)  # warm-up of the eager path
        common.sync(model.device)
        cuda = model.device.type == "cuda"
        with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
            engine.pulse(steps)
            common.sync(model.device)
    finally:
        model._graphed = graphed
    totals: dict[str, list] = {}
    top = []
    for e in prof.key_averages():
        us = e.device_time_total if cuda else e.self_cpu_time_total
        if not us:
            continue
        k = kind_of(e.key)
        t = totals.setdefault(k, [0.0, 0])
        t[0] += us / steps
        t[1] += e.count / steps
        top.append((us / steps, e.count / steps, e.key))
    all_us = sum(t[0] for t in totals.values())
    rows = [[k, f"{us:,.0f}", f"{us / max(all_us, 1e-9):.0%}", f"{n:.0f}"]
            for k, (us, n) in sorted(totals.items(), key=lambda kv: -kv[1][0])]
    rows.append(["all kernels", f"{all_us:,.0f}", "100%", f"{sum(t[1] for t in totals.values()):.0f}"])
    out = [common.table(["kind", "µs/step", "share", "kernels/step"], rows), ""]
    top.sort(reverse=True)
    out.append(common.table(["kernel", "µs/step", "calls/step"],
                            [[name[:70], f"{us:,.1f}", f"{n:.0f}"] for us, n, name in top[:12]]))
    return "\n".join(out)
