"""The device's work at the end of a cached chat turn's prefill pass, up to its first token's read.

``http_stages --kernels`` records the CUDA activity (kernels, copies, memsets) of the last turn's
first request (a cached turn: its pass feeds only the new message) with ``torch.profiler``; this
module reads the trace and lists, from the pass's last chunked WKV kernel (``_chunk_`` in its
name: the last layer's WKV) to the first copy from the device after it (the first pulse's one
synchronisation), each item's start (µs after that kernel's), duration and the idle gap before
it: the last layer's rest and the head, then whatever was queued behind the pass."""

from __future__ import annotations

import json

from server.bench import common

WKV_MARK = "_chunk_"  # the chunked WKV kernels' names (kernels/wkv_triton.py)


def device_events(trace_path: str) -> list[dict]:
    """Kernels, copies and memsets of a chrome trace, by start time."""
    with open(trace_path) as f:
        events = json.load(f).get("traceEvents", [])
    keep = ("kernel", "gpu_memcpy", "gpu_memset")
    return sorted((e for e in events if e.get("cat") in keep and "dur" in e),
                  key=lambda e: float(e["ts"]))


def tail_report(events: list[dict]) -> str:
    """From the last chunked-WKV kernel to the first device-to-host copy after it."""
    last = max((i for i, e in enumerate(events) if WKV_MARK in e["name"]), default=None)
    if last is None:
        return "no chunked WKV kernel in the trace: no prefill pass recorded"
    rows, t0, prev_end = [], float(events[last]["ts"]), None
    for e in events[last:]:
        ts, dur = float(e["ts"]), float(e["dur"])
        gap = "" if prev_end is None else f"{ts - prev_end:.1f}"
        rows.append([f"{ts - t0:.1f}", f"{dur:.1f}", gap, e["cat"], e["name"][:80]])
        prev_end = ts + dur
        if e["cat"] == "gpu_memcpy" and "DtoH" in e["name"]:
            break
    busy = sum(float(r[1]) for r in rows)
    span = float(rows[-1][0]) + float(rows[-1][1])
    head = (f"device work from the pass's last chunked WKV kernel to the first read from the "
            f"device: {len(rows)} items, span {span:.1f} µs, busy {busy:.1f} µs")
    return head + "\n" + common.table(["start µs", "µs", "gap µs", "kind", "name"], rows)
