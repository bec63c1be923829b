"""A serving process freezes its start-up objects for the garbage collector (``run.py``:
``create_app(freeze_heap=True)``, ``lifecycle.freeze_heap``): a full collection, which walked
them all (~0.1-0.2 s in a served process), no longer does; shutdown hands them back. And it
serves with the GIL hand-over interval of ``RWKV_GIL_SWITCH_US`` and the collector's
generation-0 threshold of ``RWKV_GC_THRESHOLD``."""

import gc
import re
import sys
import time

import pytest
from fastapi.testclient import TestClient


def test_a_serving_app_freezes_its_start_up_heap(tiny_model_path, tmp_path):
    from server.api.app import create_app
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"))
    assert gc.get_freeze_count() == 0
    try:
        with TestClient(create_app(settings, freeze_heap=True)) as client:
            frozen = gc.get_freeze_count()
            assert frozen > 50_000  # the tokenizer's trie is one dict per node
            r = client.post("/v1/chat/completions", json={
                "model": "rwkv-7", "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4, "temperature": 0})
            assert r.status_code == 200
            t0 = time.perf_counter()
            gc.collect()
            walked = len(gc.get_objects())  # what a full collection still walks
            assert walked < frozen / 4, (walked, frozen)
            assert time.perf_counter() - t0 < 5
        assert gc.get_freeze_count() == 0  # handed back at shutdown
        with TestClient(create_app(settings)):  # the default (tests, many apps): nothing frozen
            assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


def test_run_py_serves_with_its_heap_frozen(server):
    frozen = re.search(r"([\d,]+) start-up objects frozen", server.log())
    assert frozen and int(frozen.group(1).replace(",", "")) > 50_000, server.log()[-2000:]


def test_a_serving_app_sets_the_interpreter_and_gives_it_back(tiny_model_path, tmp_path):
    """While an app serves, the interpreter's switch interval is RWKV_GIL_SWITCH_US (default
    100 µs, not Python's 5 ms) and the collector's generation-0 threshold RWKV_GC_THRESHOLD
    (default 50,000, not Python's 700; the older generations' thresholds kept); shutdown
    restores the process's own."""
    from server.api.app import create_app
    from server.config import Settings

    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    gc.set_threshold(701, 11, 12)  # (a process's own, not the default: it must come back)
    try:
        for extra, want in (({}, (1e-4, 50_000)),
                            ({"gil_switch_us": 250, "gc_threshold": 0}, (2.5e-4, 0))):
            settings = Settings(model_path=tiny_model_path, demo=None, device="cpu",
                                api_key=None, task_db_path=str(tmp_path / "t.db"), **extra)
            with TestClient(create_app(settings)) as client:
                assert sys.getswitchinterval() == pytest.approx(want[0])
                assert gc.get_threshold() == (want[1], 11, 12)
                assert client.get("/health").status_code == 200
            assert sys.getswitchinterval() == interval
            assert gc.get_threshold() == (701, 11, 12)
        # two apps in one process, the first stopping first: the second keeps serving at the
        # settings, and the process's own come back when the last one stops
        settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                            task_db_path=str(tmp_path / "t.db"))
        first = TestClient(create_app(settings))
        second = TestClient(create_app(settings))
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        assert sys.getswitchinterval() == pytest.approx(1e-4)
        assert gc.get_threshold() == (50_000, 11, 12)
        second.__exit__(None, None, None)
        assert sys.getswitchinterval() == interval
        assert gc.get_threshold() == (701, 11, 12)
    finally:
        gc.set_threshold(*thresholds)


def test_the_admit_wait_setting_reaches_the_scheduler(tiny_model_path, tmp_path):
    """RWKV_ADMIT_WAIT_STEPS is the serving scheduler's admit_wait (4 by default; 0: pulses
    run out before a new request is admitted)."""
    from server.api.app import create_app
    from server.config import Settings

    for extra, want in (({}, 4), ({"admit_wait_steps": 0}, 0)):
        settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                            task_db_path=str(tmp_path / "t.db"), **extra)
        with TestClient(create_app(settings)) as client:
            assert client.app.state.runtime.scheduler.admit_wait == want
