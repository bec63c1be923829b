"""server.bench memory's sorting of the allocator's live blocks (the benchmark itself needs
CUDA; here a snapshot in the allocator's format stands in for one)."""

from server.bench.memory import breakdown, report, where

LIB = {"filename": "/opt/torch/lib/python3.12/site-packages/torch/nn/functional.py",
       "line": 10, "name": "linear"}


def frame(path: str, line: int, name: str) -> dict:
    return {"filename": f"/work/main/{path}", "line": line, "name": name}


def test_blocks_go_to_the_innermost_server_line():
    forward = frame("server/model/forward.py", 101, "__init__")
    engine = frame("server/scheduler/engine.py", 561, "warm_step")
    bench = frame("server/bench/memory.py", 90, "main")
    snapshot = {"segments": [
        {"total_size": 100 << 20, "segment_pool_id": (0, 0), "blocks": [
            {"size": 60 << 20, "state": "active_allocated", "frames": [LIB, forward, bench]},
            {"size": 30 << 20, "state": "inactive", "frames": [forward]},  # cached: not live
            {"size": 10 << 20, "state": "active_allocated", "frames": [engine, bench]}]},
        {"total_size": 2 << 20, "segment_type": "small", "blocks": [  # small blocks
            {"size": 512 << 10, "state": "active_allocated", "frames": [engine]},
            {"size": 1536 << 10, "state": "inactive", "frames": []}]},
        {"total_size": 12 << 20, "segment_pool_id": (1, 3), "blocks": [  # a graph's pool
            {"size": 6 << 20, "state": "active_allocated", "frames": [engine]},
            {"size": 4 << 20, "state": "inactive", "frames": [engine]},  # kept for replays
            {"size": 2 << 20, "state": "active_allocated", "frames": []}]}]}
    b = breakdown(snapshot)
    assert b["by_line"] == {"server/model/forward.py:101 __init__": [60 << 20, 1],
                            "server/scheduler/engine.py:561 warm_step": [(16 << 20) + (512 << 10),
                                                                         3],
                            "(no stack)": [2 << 20, 1]}
    assert (b["allocated"], b["pools"], b["reserved"], b["pools_reserved"]) == (
        (78 << 20) + (512 << 10), 8 << 20, 114 << 20, 12 << 20)
    assert b["small"] == [1, 2 << 20, 512 << 10]
    assert b["small_by"] == {"general stream 0": [1, 2 << 20, 512 << 10, {
        "server/scheduler/engine.py:561 warm_step": 512 << 10}]}
    assert where([LIB]) == f"{LIB['filename']}:10 linear"  # no server line: the innermost
    text = report(b, top=2)
    assert "| server/model/forward.py:101 __init__ | 60.0 | 1 |" in text
    assert "| (1 other lines) | 2.0 | |" in text
    assert "live blocks 78.5 MiB (of them in CUDA graphs' private pools 8.0)" in text
    assert ("segments reserved 114.0 MiB (of them the graphs' pools' 12.0; 1 small-block "
            "segments 2.0, live in them 0.5)") in text
    assert ("small-block segments, general stream 0: 1, 2.0 MiB, live 0.50 (most: "
            "server/scheduler/engine.py:561 warm_step 0.50)") in text
    assert "(no stack)" not in text  # (past the top: counted only in the other lines' row)
    assert "other lines" not in report(b, top=3)  # (none left out)
    # a block allocated in the benchmark itself, under a library: the library's line (the
    # innermost frame), not the benchmark's
    assert where([LIB, bench]) == f"{LIB['filename']}:10 linear"
    # a block freed but waiting for its stream's work is no longer live
    pending = {"segments": [{"total_size": 4 << 20, "blocks": [
        {"size": 4 << 20, "state": "active_pending_free", "frames": [forward]}]}]}
    assert breakdown(pending)["allocated"] == 0 and breakdown(pending)["by_line"] == {}


def test_the_peak_since_a_marker_and_what_was_live_at_it():
    from server.bench.memory import load_tasks, peak_since

    sampler = frame("server/model/sampler.py", 200, "top_p")
    head = frame("server/model/fused.py", 311, "head")
    MARK = 0x1000

    def ev(action, addr, size, frames=()):
        return {"action": action, "addr": addr, "size": size, "frames": list(frames)}

    trace = [ev("alloc", MARK, 512),  # an earlier block at the marker's address: not the mark
             ev("free_completed", MARK, 512),
             ev("alloc", 0x9000, 4 << 20, [head]),  # before the marker: in base, not listed
             ev("alloc", MARK, 512),  # the marker
             ev("alloc", 0x2000, 8 << 20, [sampler]),
             ev("alloc", 0x3000, 2 << 20, [head]),
             ev("free_requested", 0x2000, 8 << 20),  # still live until completed
             ev("alloc", 0x4000, 1 << 20, [sampler]),  # the peak: base + 11 MiB
             ev("free_completed", 0x2000, 8 << 20),
             ev("free_completed", 0x9000, 4 << 20),  # a block from before the marker
             ev("alloc", 0x5000, 6 << 20, [head])]  # 10 + 1 + 2 + 6 - 8 - 4: below the peak
    base = 100 << 20
    p = peak_since(trace, MARK, base)
    assert p["peak"] == base + (11 << 20)
    assert p["by_line"] == {"server/model/sampler.py:200 top_p": [9 << 20, 2],
                            "server/model/fused.py:311 head": [2 << 20, 1]}
    assert p["allocated"] == 11 << 20
    # nothing allocated after the marker: the peak is the base, no line
    assert peak_since(trace[:4], MARK, base) == {"peak": base, "by_line": {}, "allocated": 0}
    try:
        peak_since(trace[4:], MARK, base)
        raise AssertionError("a trace without the marker must not give a peak")
    except ValueError as e:
        assert "wrapped" in str(e)
    # the load's requests: every sampling variant, penalties on every fourth
    reqs = load_tasks(12)
    assert len({r["prompt"] for r in reqs}) > 1 and [r["seed"] for r in reqs] == list(range(12))
    assert reqs[0]["temperature"] == 0.0 and reqs[3]["presence_penalty"] == 0.5
    assert "presence_penalty" not in reqs[2]


def test_the_bytes_requested_by_a_devices_live_blocks():
    """The trace counts bytes requested (a block's ``size`` is rounded up): the load's base is
    taken in that unit, on the model's device only."""
    from server.bench.memory import requested_live

    snapshot = {"segments": [
        {"device": 0, "blocks": [
            {"size": 64 << 20, "requested_size": 63 << 20, "state": "active_allocated"},
            {"size": 2 << 20, "requested_size": 2 << 20, "state": "inactive"}]},
        {"device": 1, "blocks": [
            {"size": 8 << 20, "requested_size": 8 << 20, "state": "active_allocated"}]}]}
    assert requested_live(snapshot, 0) == 63 << 20
    assert requested_live(snapshot, 1) == 8 << 20


class _FakeDriver:
    """cuCtxGetLimit / cuCtxSetLimit as libcuda answers them (0: success)."""

    def __init__(self, limit: int, set_result: int = 0):
        self.limit, self.set_result, self.calls = limit, set_result, []

    def cuCtxGetLimit(self, out, which):
        self.calls.append(("get", which))
        out._obj.value = self.limit
        return 0

    def cuCtxSetLimit(self, which, value):
        self.calls.append(("set", which, value.value))
        return self.set_result


def test_the_local_memory_probe_reads_and_lowers_the_stack_limit(monkeypatch):
    """The per-thread stack limit is read (CU_LIMIT_STACK_SIZE), set back to the default, and
    the device memory that frees is reported; a refusal is said, not hidden."""
    import contextlib

    import torch

    from server.bench.memory import MIB, local_memory_probe

    free = iter([1000 * MIB, 1270 * MIB])
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (next(free), 2000 * MIB))
    selected = []
    monkeypatch.setattr(torch.cuda, "device",
                        lambda d: selected.append(d) or contextlib.nullcontext())
    drv = _FakeDriver(8192)
    line = local_memory_probe("cuda:0", lib=drv)
    assert line == "stack limit 8,192 bytes a thread; set to 1,024: 270.0 MiB given back", line
    assert drv.calls == [("get", 0), ("set", 0, 1024)] and selected == ["cuda:0"]
    free = iter([1000 * MIB])
    line = local_memory_probe("cuda:0", lib=_FakeDriver(8192, set_result=1))
    assert line == "stack limit 8,192 bytes a thread (not lowered: error 1)", line


def test_triton_kernels_with_local_memory_are_listed(monkeypatch):
    """Every compiled kernel of server.model.kernels is looked at; those whose local memory
    (Triton's ``n_spills``: the driver's local size in 4-byte words) is not zero come back with
    their bytes a thread and registers, largest first."""
    from types import SimpleNamespace

    from server.bench.memory import triton_local_sizes
    from server.model.kernels import fused_triton, gemv_triton

    spilled = SimpleNamespace(n_spills=24, n_regs=255, name="_relu_sq_kernel")
    clean = SimpleNamespace(n_spills=0, n_regs=40, name="_add_parts_kernel")
    big = SimpleNamespace(n_spills=128, n_regs=255, name="_gemv_kernel")
    for fn, kernels in ((fused_triton._relu_sq_kernel, [spilled]),
                        (fused_triton._add_parts_kernel, [clean]),
                        (gemv_triton._gemv_kernel, [big])):
        monkeypatch.setattr(fn, "device_caches", {0: ({str(k): k for k in kernels}, None)},
                            raising=False)
    assert triton_local_sizes() == [(512, 255, "_gemv_kernel"), (96, 255, "_relu_sq_kernel")]


def test_the_copyback_budget_option_sets_the_engines_budget():
    """``--copyback-mb``: in the stress bench MiB on the engine's copy-back (0 leaves the
    served budget; a negative value is refused); in the memory bench the served setting,
    RWKV_COPYBACK_MB, as ``--prefill-tokens`` gives RWKV_PREFILL_TOKENS (0: as served)."""
    from types import SimpleNamespace

    import pytest

    from server.bench import stress
    from server.bench.common import apply_copyback
    from server.bench.memory import parse_args, served_options
    from server.config import Settings
    from server.scheduler.copyback import BUDGET_BYTES

    engine = SimpleNamespace(copyback=SimpleNamespace(budget=BUDGET_BYTES))
    apply_copyback(engine, stress.parse_args(["--copyback-mb", "0"]).copyback_mb)
    assert engine.copyback.budget == BUDGET_BYTES
    apply_copyback(engine, stress.parse_args(["--copyback-mb", "512"]).copyback_mb)
    assert engine.copyback.budget == 512 * 2**20  # (the default: 256)
    with pytest.raises(SystemExit):
        apply_copyback(engine, -1)
    assert served_options(parse_args([])) == {}
    given = served_options(parse_args(["--copyback-mb", "512", "--prefill-tokens", "4096"]))
    assert given == {"copyback_mb": 512, "prefill_tokens": 4096}
    assert Settings(**given).copyback_mb == 512
