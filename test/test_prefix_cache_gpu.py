"""Prefix cache on CUDA (``pytest -m gpu``): device and host tiers, same tokens as without it."""

import pytest
import torch

from server.scheduler import DynamicScheduler
from server.scheduler.prefill import TURN_TOKEN
from server.scheduler.prefix_cache import PrefixCache, state_nbytes
from server.task.task import Task

pytestmark = pytest.mark.gpu
SYSTEM = "System: " + "You answer in one short sentence, politely. " * 40


@pytest.fixture(scope="module")
def cuda_loader(tiny_model_path):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from server.model.loader import RWKV070ModelLoader

    return RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp32")


def run(loader, prompts, cache, **kw):
    sched = DynamicScheduler(loader, max_batch_size=16, buffer_size=8, prefix_cache=cache)
    tasks = []
    for p in prompts:
        t = Task(loader.encode(p), max_tokens=12, **kw)
        t.cache_origin = ""
        sched.add_task(t)
        tasks.append(t)
    sched.run()
    return [t.output for t in tasks], sched


@pytest.mark.parametrize("sampling", [dict(temperature=0.0), dict(temperature=0.8, seed=3)])
def test_tiers_and_equal_tokens(cuda_loader, sampling):
    prompts = [f"{SYSTEM}\n\nUser: item {i}?\n\nAssistant:" for i in range(8)]
    plain, _ = run(cuda_loader, prompts, None, **sampling)
    one = state_nbytes(cuda_loader.gen_state(1))
    cache = PrefixCache(64 * one, device=cuda_loader.model.device, device_bytes=4 * one)
    first, _ = run(cuda_loader, prompts, cache, **sampling)
    st = cache.stats()
    assert st["device_bytes"] <= 4 * one < st["bytes"]  # older entries moved to host memory
    assert any(not e.hot and e.state.device.type == "cpu" for e in cache._lru.values())
    again, sched = run(cuda_loader, prompts, cache, **sampling)  # hits on host entries too
    assert first == plain and again == plain
    # a whole prompt's entry keeps its last token's logits on the device tier only: from a
    # host entry a prompt starts at its last turn boundary and feeds the rest (4 tokens)
    toks = [cuda_loader.encode(p) for p in prompts]
    tails = [len(t) - max(i for i, x in enumerate(t) if x == TURN_TOKEN) for t in toks]
    assert 0 < sched.prefiller.prefilled_tokens <= sum(tails) == 8 * 4
    assert all(e.state.device.type == ("cuda" if e.hot else "cpu") for e in cache._lru.values())
