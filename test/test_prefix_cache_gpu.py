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
    # a prompt fed with others keeps no logits: it starts at its last turn boundary and feeds
    # the rest (4 tokens)
    toks = [cuda_loader.encode(p) for p in prompts]
    tails = [len(t) - max(i for i, x in enumerate(t) if x == TURN_TOKEN) for t in toks]
    assert sched.prefiller.prefilled_tokens <= sum(tails) == 8 * 4
    for e in cache._lru.values():
        on = "cuda" if e.hot else "cpu"
        assert e.state.device.type == on and (e.logits is None or e.logits.device.type == on)


@pytest.mark.parametrize("sampling", [dict(temperature=0.0), dict(temperature=0.8, seed=3)])
@pytest.mark.parametrize("room", ["state", "none"])
def test_a_whole_prompt_on_the_host_tier_keeps_its_logits(cuda_loader, sampling, room):
    """A device tier with room for a whole prompt's state but not its logits (or none): the
    entry keeps them in its pinned arena row's logits area (no pinned allocation per move), and
    the same prompt again runs no model call before its first token, with the uncached tokens."""
    prompt = [f"{SYSTEM}\n\nUser: item 3?\n\nAssistant:"]
    plain, _ = run(cuda_loader, prompt, None, **sampling)
    n = len(cuda_loader.encode(prompt[0]))
    state = state_nbytes(cuda_loader.gen_state(1)) + 512 + 4 * n
    cache = PrefixCache(64 * state, device=cuda_loader.model.device,
                        device_bytes=state + 64 if room == "state" else 0,
                        vocab=cuda_loader.cfg.vocab_size)
    cache.reserve_host(cuda_loader.model.new_state(1))  # as a server's start does
    first, _ = run(cuda_loader, prompt, cache, **sampling)
    whole = next(e for e in cache._lru.values() if e.key[1] == n)
    assert not whole.hot and whole.logits.device.type == "cpu" and whole.logits.is_pinned()
    # in its arena row's logits area (pinned up front), not a pinned block of its own
    assert whole.row is not None
    assert whole.logits.data_ptr() == cache.arena.logits[whole.row].data_ptr()
    for _ in range(2):
        again, sched = run(cuda_loader, prompt, cache, **sampling)
        assert sched.prefiller.prefilled_tokens == 0 and again == first == plain
    assert cache.stats()["bytes"] == sum(e.nbytes for e in cache._lru.values())
