"""Where a decode step's or a prefill pass's GPU time goes: torch.profiler over an eager call
(CUDA graphs off, so every kernel is its own launch), kernel times summed by kind. Used by
``decode --profile`` and ``prefill --profile``.

Kinds by kernel name: matmul (cuBLAS/CUTLASS), wkv (the Triton recurrence), fused (the Triton
element-wise kernels of fused.py), sampling (top-k, sort, scans, searchsorted) and other
(element-wise torch kernels, copies, indexing)."""

from __future__ import annotations


from server.bench import common

KINDS = (("matmul", ("gemm", "gemv", "cutlass", "nvjet", "sm90_", "cublas", "splitk")),
         ("wkv", ("_recurrent_kernel", "_chunk_", "_decode_kernel")),
         ("fused", ("_ln_mix", "_pre_wkv", "_post_wkv", "_activate")),
         ("sampling", ("topk", "sort", "scan", "searchsorted", "radix", "cumsum", "gather",
                       "_block_max", "_tau_kernel", "_select_kernel", "_prepare_kernel",
                       "_update_kernel")))


def kind_of(name: str) -> str:
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def profile_pulse(engine, steps: int = 8) -> str:
    """Profile ``steps`` eager decode steps of ``engine`` (slots live); a report of µs/step."""
    engine.pulse(2)  # warm-up of the eager path
    return profile_eager(engine.model, lambda: engine.pulse(steps), steps, "µs/step")


def profile_eager(model, fn, per: int = 1, unit: str = "µs/call") -> str:
    """Profile ``fn()`` with the model's CUDA graphs off (decode and prefill: every kernel is its
    own launch); kernel time summed by kind and divided by ``per``; a report."""
    from torch.profiler import ProfilerActivity, profile

    graphed, model._graphed = model._graphed, None
    graphed_prefill, model._graphed_prefill = model._graphed_prefill, None
    cuda = model.device.type == "cuda"
    try:
        fn()  # warm-up of the eager path (compilation, library init)
        common.sync(model.device)
        with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
            fn()
            common.sync(model.device)
    finally:
        model._graphed, model._graphed_prefill = graphed, graphed_prefill
    totals: dict[str, list] = {}
    top = []
    for e in prof.key_averages():
        us = e.device_time_total if cuda else e.self_cpu_time_total
        if not us:
            continue
        k = kind_of(e.key)
        t = totals.setdefault(k, [0.0, 0])
        t[0] += us / per
        t[1] += e.count / per
        top.append((us / per, e.count / per, e.key))
    all_us = sum(t[0] for t in totals.values())
    rows = [[k, f"{us:,.0f}", f"{us / max(all_us, 1e-9):.0%}", f"{n:.0f}"]
            for k, (us, n) in sorted(totals.items(), key=lambda kv: -kv[1][0])]
    rows.append(["all kernels", f"{all_us:,.0f}", "100%", f"{sum(t[1] for t in totals.values()):.0f}"])
    out = [common.table(["kind", unit, "share", "kernels"], rows), ""]
    top.sort(reverse=True)
    out.append(common.table(["kernel", unit, "calls"],
                            [[name[:70], f"{us:,.1f}", f"{n:.0f}"] for us, n, name in top[:24]]))
    return "\n".join(out)


def timeline_pulse(engine, steps: int = 32) -> str:
    """One pulse of ``steps`` decode steps as served (CUDA graphs on): ``timeline``."""
    if engine.device.type != "cuda":
        return "(CUDA only)"
    engine.pulse(2)  # graphs captured, kernels compiled
    return timeline(lambda: engine.pulse(steps), engine.device, steps, "step")


def timeline(fn, device, per: int = 1, unit: str = "call") -> str:
    """Profile ``fn()`` as it runs (CUDA graphs as they are): where the device is busy and
    where it waits. The call's wall time against its kernels' span (first start to last end;
    the rest is host work before the first launch and after the last kernel), kernel time by
    kind (kernels launched early under PDL count their wait too), and the idle gaps between
    consecutive kernels summed by the kernels on either side (the largest first); µs per
    ``per``-th of the call. The profiler adds its own time: on the H200 a 500-kernel prefill
    graph's first kernel started ~1 ms after the copy before it, while the same pass unprofiled
    took 5.24 ms against 4.95 ms of kernels (session 15); read gaps against the unprofiled
    wall time."""
    import time

    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if device.type != "cuda":
        return "(CUDA only)"
    common.sync(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        fn()
        common.sync(device)
        wall = (time.perf_counter() - t0) * 1e6
    spans = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                   if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start)
    if not spans:
        return "no kernel events recorded (the profiler saw nothing of the graphs)"
    kinds: dict[str, float] = {}
    gaps: dict[tuple[str, str], list] = {}
    end, prev = spans[0][0], None
    for start, stop, name in spans:
        kinds[kind_of(name)] = kinds.get(kind_of(name), 0.0) + (stop - start)
        if prev is not None and start > end:
            g = gaps.setdefault((prev[:48], name[:48]), [0.0, 0])
            g[0] += start - end
            g[1] += 1
        if stop >= end:
            end, prev = stop, name
    span = spans[-1][1] - spans[0][0]
    idle = sum(g[0] for g in gaps.values())
    rows = [[k, f"{us / per:,.1f}"] for k, us in sorted(kinds.items(), key=lambda kv: -kv[1])]
    out = [f"{len(spans) / per:.0f} kernels a {unit}; wall {wall / per:,.1f} µs a {unit}, "
           f"kernel span {span / per:,.1f} (outside it {(wall - span) / per:,.1f}), idle "
           f"inside it {idle / per:,.1f} ({idle / span:.1%})",
           common.table(["kind", f"µs/{unit}"], rows), ""]
    top = sorted(gaps.items(), key=lambda kv: -kv[1][0])[:12]
    out.append(common.table(["gap after", "before", f"µs/{unit}", f"gaps/{unit}"],
                            [[a, b, f"{us / per:,.1f}", f"{n / per:.1f}"]
                             for (a, b), (us, n) in top]))
    return "\n".join(out)
