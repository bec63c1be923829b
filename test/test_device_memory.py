"""Device memory in /health, /metrics and the start log (server/model/memory.py). CUDA's
counters are stood in for here (no GPU in CI); session 59's GPU call 6 read them served."""

from __future__ import annotations

import httpx
import torch
from prometheus_client.parser import text_string_to_metric_families

from openai_helpers import LiveServer
from server.model import memory
from test_api_prefix_cache import make_settings

FIGURES = {"allocated": 4 << 30, "peak_allocated": 5 << 30, "reserved": 6 << 30,
           "used": 7 << 30, "total": 80 << 30}


def fake_cuda(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev: (73 << 30, 80 << 30))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda dev: 4 << 30)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda dev: 5 << 30)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda dev: 6 << 30)


def test_figures_come_from_the_allocator_and_the_driver(monkeypatch):
    assert memory.device_memory("cpu") is None
    fake_cuda(monkeypatch)
    got = memory.device_memory("cuda:0")
    assert got == FIGURES
    assert memory.describe(got) == ("4.00 GiB allocated (peak 5.00), 6.00 GiB reserved; "
                                    "7.00 of the device's 80.00 GiB in use")
    # each figure is the model's device's (RWKV_DEVICE=cuda:1), not the current device's
    asked = []
    for name in ("mem_get_info", "memory_allocated", "max_memory_allocated", "memory_reserved"):
        real = getattr(torch.cuda, name)
        monkeypatch.setattr(torch.cuda, name,
                            lambda dev=None, real=real, name=name: (asked.append((name, dev)),
                                                                    real(dev))[1])
    assert memory.device_memory("cuda:1") == FIGURES
    assert len(asked) == 4 and all(dev == torch.device("cuda:1") for _, dev in asked), asked


def test_a_capture_under_way_gets_the_last_reading_at_once(monkeypatch):
    """While CAPTURE_LOCK is held (a graph capture, or the copy-back's gather: a driver call
    from another thread could invalidate a capture) a read makes no driver query and does not
    wait: it gets the last reading (None before any), its allocator counters current. With
    ``wait`` (the start log, benchmarks) it waits for the lock."""
    import threading

    from server.model.cuda_graph import CAPTURE_LOCK

    fake_cuda(monkeypatch)
    monkeypatch.setattr(memory, "_LAST", {})
    queries = []
    monkeypatch.setattr(torch.cuda, "mem_get_info",
                        lambda dev: queries.append(dev) or (73 << 30, 80 << 30))
    with CAPTURE_LOCK:
        assert memory.device_memory("cuda:0") == {**FIGURES, "used": None, "total": None}
        assert queries == []
        assert "? of the device's ? GiB" in memory.describe(memory.device_memory("cuda:0"))
    assert memory.device_memory("cuda:0") == FIGURES and len(queries) == 1
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda dev: 1 << 30)
    got = []
    with CAPTURE_LOCK:
        assert memory.device_memory("cuda:0") == {**FIGURES, "allocated": 1 << 30}
        waiting = threading.Thread(
            target=lambda: got.append(memory.device_memory("cuda:0", wait=True)))
        waiting.start()
        waiting.join(0.3)
        assert waiting.is_alive() and got == [] and len(queries) == 1
    waiting.join(5)
    assert got == [{**FIGURES, "allocated": 1 << 30}] and len(queries) == 2


def test_health_and_metrics_show_them_on_cuda_only(tiny_model_path, tmp_path, monkeypatch):
    with LiveServer(make_settings(tiny_model_path, tmp_path)) as srv:
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            assert "device_memory" not in c.get("/health").json()  # a CPU model
            metrics = c.get("/metrics")
            assert metrics.status_code == 200 and "rwkv_prefix_cache_hits" in metrics.text
            assert "rwkv_device_memory_used_bytes" not in metrics.text
            # the model on CUDA, as far as the reports go
            import server.api.app
            import server.api.metrics

            for module in (server.api.app, server.api.metrics):
                monkeypatch.setattr(module, "device_memory",
                                    lambda dev: memory.device_memory("cuda:0"))
            fake_cuda(monkeypatch)
            assert c.get("/health").json()["device_memory"] == FIGURES
            fams = {f.name: f for f in text_string_to_metric_families(c.get("/metrics").text)}
            for key, value in FIGURES.items():
                assert fams[f"rwkv_device_memory_{key}_bytes"].samples[0].value == value
            # a capture (or the copy-back's gather) under way: both answer at once, from the
            # last driver reading (a wait for the lock stalled /metrics' event loop)
            from server.model.cuda_graph import CAPTURE_LOCK

            with CAPTURE_LOCK:
                assert c.get("/health", timeout=2).json()["device_memory"] == FIGURES
                assert "rwkv_device_memory_used_bytes" in c.get("/metrics", timeout=2).text


def test_the_idle_give_back_empties_the_cache_unless_it_may_not(monkeypatch):
    """``give_back_cached`` (the idle daemon's, idle_trim.py) calls ``empty_cache`` with the
    model's device current, but not while another thread holds CAPTURE_LOCK (a capture would
    break), nor while another GPU holds reserved memory (``empty_cache`` empties every
    device's cache; pytorch#196258), nor off CUDA; and it never waits for the lock."""
    import contextlib
    import threading

    from server.model.cuda_graph import CAPTURE_LOCK

    reserved = {0: 6 << 30, 1: 0, 2: 0}
    calls, current = [], []
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i: reserved[i])
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(reserved))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", lambda i: (
        contextlib.ExitStack() if current.append(i) else contextlib.nullcontext()))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(current[-1]))
    assert memory.give_back_cached("cpu") is None
    assert memory.give_back_cached("cuda") and calls == [0]
    reserved[1] = 2 << 20  # another model on cuda:1
    assert memory.give_back_cached("cuda:0") is None and calls == [0]  # (not to be retried)
    reserved[0], reserved[1] = 0, 6 << 30
    assert memory.give_back_cached("cuda:1") and calls == [0, 1]
    held, release = threading.Event(), threading.Event()

    def capture():  # another thread's capture holds the lock
        with CAPTURE_LOCK:
            held.set()
            release.wait(10)
    other = threading.Thread(target=capture)
    other.start()
    try:
        assert held.wait(10)
        assert memory.give_back_cached("cuda:1") is False and calls == [0, 1]  # at once
    finally:
        release.set()
        other.join()
    assert not CAPTURE_LOCK.locked()
