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
        {"total_size": 8 << 20, "segment_pool_id": (1, 3), "blocks": [  # a graph's pool
            {"size": 6 << 20, "state": "active_allocated", "frames": [engine]},
            {"size": 2 << 20, "state": "active_allocated", "frames": []}]}]}
    b = breakdown(snapshot)
    assert b["by_line"] == {"server/model/forward.py:101 __init__": [60 << 20, 1],
                            "server/scheduler/engine.py:561 warm_step": [16 << 20, 2],
                            "(no stack)": [2 << 20, 1]}
    assert (b["allocated"], b["pools"], b["reserved"]) == (78 << 20, 8 << 20, 108 << 20)
    assert where([LIB]) == f"{LIB['filename']}:10 linear"  # no server line: the innermost
    text = report(b, top=2)
    assert "| server/model/forward.py:101 __init__ | 60.0 | 1 |" in text
    assert "| (1 other lines) | 2.0 | |" in text
    assert "live blocks 78.0 MiB (of them in CUDA graphs' private pools 8.0)" in text
    assert "(no stack)" not in text  # (past the top: counted only in the other lines' row)
    assert "other lines" not in report(b, top=3)  # (none left out)
    # a block allocated in the benchmark itself, under a library: the library's line (the
    # innermost frame), not the benchmark's
    assert where([LIB, bench]) == f"{LIB['filename']}:10 linear"
    # a block freed but waiting for its stream's work is no longer live
    pending = {"segments": [{"total_size": 4 << 20, "blocks": [
        {"size": 4 << 20, "state": "active_pending_free", "frames": [forward]}]}]}
    assert breakdown(pending)["allocated"] == 0 and breakdown(pending)["by_line"] == {}
