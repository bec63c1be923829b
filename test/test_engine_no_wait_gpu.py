"""On CUDA the host loads a request, builds the sampler's plan, queues its prefill pass and starts
it without waiting for the device: a wait there (a copy from pageable memory, ``t[idx] = scalar``,
the plan read from device tensors) put the host's remaining work behind the pass, ~1-2 ms of a
cached chat turn's time to first token on the H200 (docs/performance.md, session 9)."""

import time

import pytest
import torch

from server.bench.common import DummyTask
from server.model.loader import RWKV070ModelLoader
from server.scheduler.engine import BatchEngine

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.mark.parametrize("rows", [1, 3])  # one sequence: a prefill graph; three: padded eager
def test_load_plan_prefill_and_start_never_wait_for_the_device(tiny_model_path, rows):
    loader = RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp16")
    engine = BatchEngine(loader.model)
    engine.resize(4, [])
    slots = list(range(rows))
    prompts = [[100 + i + j for j in range(20 + 7 * i)] for i in slots]
    for rep in range(2):  # the first round compiles and captures (those may wait)
        torch.cuda.set_sync_debug_mode("error" if rep else "default")  # raises on a wait
        try:
            engine.load(slots, [DummyTask(temperature=0.0 if i else 1.0, seed=i)
                                for i in slots])
            engine.sampler.uniforms(engine.samp, 1)  # the plan, from the host copy
            engine.prefill(slots, prompts, first=set(slots) if rep else ())
            engine.start(slots, [p[-1] for p in prompts], [2] * rows)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        res = engine.pulse(2)  # its one wait: the results' copy home
        assert all(len(t) == 2 for t in res.tokens[:rows])
        engine.free(slots)


def test_an_idle_daemon_gives_the_cached_device_blocks_back(tiny_model_path, monkeypatch):
    """A load's passes leave PyTorch's cache holding device memory that nvidia-smi counts
    against the server (a served 2.9B: 8.99 GiB reserved after a load for 8.00 allocated,
    session 71): once idle for ``IDLE_S`` the daemon gives it back, as it does the host's."""
    from server.scheduler import idle_trim
    from server.scheduler.dynamic import DynamicScheduler

    monkeypatch.setattr(idle_trim, "IDLE_S", 0.5)
    loader = RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp16")
    scheduler = DynamicScheduler(loader, max_batch_size=8, buffer_size=4)
    scheduler.start_daemon()
    try:
        tasks = [scheduler.new_task(prompt=[100 + i] * (300 + 40 * i), max_tokens=3)
                 for i in range(6)]
        assert all(t.wait(60) for t in tasks)
        # (a tiny model's passes hold little: a block of 64 MiB freed to the cache as well,
        # then a request, so that the idle spell begins after it. An idle spell may already
        # have come while the tasks' states were copied home, a first give-back with it, as
        # on a fresh H100 in session 73: the give-back awaited is the next one)
        trim = scheduler._idle_trim
        torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
        busy, before = torch.cuda.memory_reserved(), trim.gave_back
        assert scheduler.new_task(prompt=[5, 6], max_tokens=2).wait(60)
        deadline = time.monotonic() + 10
        while trim.gave_back == before and time.monotonic() < deadline:
            time.sleep(0.05)
        idle = torch.cuda.memory_reserved()
        assert trim.gave_back > before and busy - idle >= 32 * 2**20, (busy, idle)
        again = scheduler.new_task(prompt=[7] * 500, max_tokens=3)  # works after it
        assert again.wait(60) and len(again.output) == 3
    finally:
        scheduler.shutdown()
