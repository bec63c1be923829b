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
    entry keeps them in pinned host memory, and the same prompt again runs no model call
    before its first token, with the uncached tokens."""
    prompt = [f"{SYSTEM}\n\nUser: item 3?\n\nAssistant:"]
    plain, _ = run(cuda_loader, prompt, None, **sampling)
    n = len(cuda_loader.encode(prompt[0]))
    state = state_nbytes(cuda_loader.gen_state(1)) + 512 + 4 * n
    cache = PrefixCache(64 * state, device=cuda_loader.model.device,
                        device_bytes=state + 64 if room == "state" else 0)
    first, _ = run(cuda_loader, prompt, cache, **sampling)
    whole = next(e for e in cache._lru.values() if e.key[1] == n)
    assert not whole.hot and whole.logits.device.type == "cpu" and whole.logits.is_pinned()
    for _ in range(2):
        again, sched = run(cuda_loader, prompt, cache, **sampling)
        assert sched.prefiller.prefilled_tokens == 0 and again == first == plain
    assert cache.stats()["bytes"] == sum(e.nbytes for e in cache._lru.values())


# ---- from session 55's mutation testing: behaviour no test pinned down ------------------------
@pytest.mark.parametrize("room", [True, False])
def test_logits_live_on_their_entrys_tier(room):
    """On CUDA an entry's logits are where its state is: pinned host memory on the host tier
    (moved there, or joining a host entry that has no room on the device), device memory on
    the device tier (promoted by a hit, or gaining them with room), and a lookup of the whole
    prompt hands them over on the device whichever tier holds them. On the CPU every such move
    is a no-op: mutations that left them behind on the device (a host entry holding device
    memory outside the tier's budget), on the host (a device entry's or a lookup's logits in
    host memory), or not pinned, each failed no test (session 55's mutation testing)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from array import array

    from server.model.state import State
    from server.scheduler.prefix_cache import ENTRY_OVERHEAD, prefix_hashes

    dev = torch.device("cuda", torch.cuda.current_device())

    def state(value):
        return State(torch.full((2, 2, 1, 8), value, device=dev),
                     torch.full((2, 1, 2, 4, 4), value, device=dev))

    size = state_nbytes(state(0.0)) + 4 * 20 + ENTRY_OVERHEAD
    logits = torch.arange(8.0, device=dev)
    cache = PrefixCache(4 * size + 64, device=dev, device_bytes=size + (32 if room else 0),
                        min_tokens=2)
    seqs = [array("I", [i] * 20) for i in range(1, 4)]

    def insert(i, value, with_logits):
        key = cache.key("", prefix_hashes(seqs[i]), 20)
        return cache.insert(key, seqs[i], state(value),
                            logits=logits + value if with_logits else None, defer=True)

    def entry(i):
        return next(e for e in cache._lru.values() if e.tokens == seqs[i])

    def on_its_tier(e):
        if e.hot:
            return e.state.wkv.device == dev and (e.logits is None or e.logits.device == dev)
        return e.state.wkv.device.type == "cpu" and (
            e.logits is None or (e.logits.device.type == "cpu" and e.logits.is_pinned()))

    def whole(i):
        found = cache.lookup("", prefix_hashes(seqs[i]), seqs[i], 0, 20, logits_at=20)
        assert found[0] == 20 and found[2].device == dev
        return found[2]

    assert insert(0, 0.0, True) and insert(1, 1.0, False)
    cache.settle()  # seqs[0] (the older) moved to the host with its logits
    assert not entry(0).hot and entry(0).logits is not None and on_its_tier(entry(0))
    assert torch.equal(whole(0), logits)  # promoted with room; from the host without
    assert entry(0).hot == room and on_its_tier(entry(0)) and entry(0).logits is not None
    cache.settle()
    assert insert(2, 2.0, False)
    cache.settle()
    assert not entry(1).hot and entry(1).logits is None
    assert not insert(1, 9.0, True)  # a lone pass's logits join the host entry
    assert entry(1).hot == room and entry(1).logits is not None and on_its_tier(entry(1))
    cache.settle()
    assert all(on_its_tier(e) for e in cache._lru.values())
    assert torch.equal(whole(1), logits + 9.0)
    torch.cuda.synchronize()
    assert all(on_its_tier(e) for e in cache._lru.values())
