"""Prefill on CUDA gives the same bits however a prompt is cut into passes at multiples of the
WKV chunk (``RWKV7.split_invariant``): what lets the prefix cache resume a prompt without
changing its outputs (run on the GPU machine: pytest -m gpu)."""

import pytest
import torch

from server.model.checkpoint import infer_config
from server.model.forward import RWKV7
from server.model.random import make_random_state_dict

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]
N_TOKENS = 1886  # issue 7's last chat turn
# cuts (ascending) of the prompt into passes, all at multiples of 16 tokens; between them:
# passes of 16 and 32 tokens (graph buckets below 64 rows), of 1,024 (the prefill chunk) and more
CUTS = [[1728], [1024, 1728], [1040], [16], [1872], [1856], [1792], [32, 48, 1024, 1600]]


@pytest.fixture(scope="module", params=[2560, 4096], ids=["2.9b", "7.2b"])
def sd(request):
    # two layers of the 2.9B and of the 7.2B model's width: their product shapes (cuBLAS picks
    # kernels by shape)
    return make_random_state_dict(2, request.param, dtype=torch.float16, device="cuda")


def prefill(model: RWKV7, tokens: list[int], cuts: list[int]):
    state, start = model.new_state(1), 0
    for end in cuts + [len(tokens)]:
        logits = model.prefill([tokens[start:end]], state)
        start = end
    return logits, state


def same(a, b) -> bool:
    (la, sa), (lb, sb) = a, b
    return torch.equal(la, lb) and torch.equal(sa.wkv, sb.wkv) and torch.equal(sa.shift, sb.shift)


@pytest.mark.parametrize("state_dtype", [torch.float32, torch.float16])
def test_aligned_cuts_change_no_bit(sd, state_dtype):
    model = RWKV7(sd, infer_config(sd), device="cuda", dtype=torch.float16,
                  state_dtype=state_dtype)
    assert model.split_invariant and model.prefill_align == 16
    tokens = torch.randint(0, 65536, (N_TOKENS,), generator=torch.Generator().manual_seed(0))
    tokens = tokens.tolist()
    whole = prefill(model, tokens, [])
    for cuts in CUTS:
        assert same(prefill(model, tokens, cuts), whole), cuts


def test_without_it_cuts_change_bits(sd):
    """The control: the same cuts without split invariance (cuBLAS's split K for few rows, the
    split LayerNorm rows and the token loop of short passes) change the results."""
    model = RWKV7(sd, infer_config(sd), device="cuda", dtype=torch.float16,
                  split_invariant=False)
    tokens = torch.randint(0, 65536, (N_TOKENS,), generator=torch.Generator().manual_seed(0))
    tokens = tokens.tolist()
    whole = prefill(model, tokens, [])
    assert sum(not same(prefill(model, tokens, cuts), whole) for cuts in CUTS) >= 4


@pytest.mark.parametrize("invariant", [True, False])
def test_a_resumed_chat_ends_in_the_uncached_bits(sd, invariant):
    """Through the scheduler and the prefix cache (fp16 fused path, graphs): the next turn of a
    chat resumes from the cached first turn and ends, prompt and six decoded tokens, in the
    bits of the same prompt computed without the cache; without split invariance it does not."""
    from server.model.loader import RWKV070ModelLoader
    from server.scheduler import DynamicScheduler
    from server.scheduler.prefix_cache import PrefixCache
    from server.task.task import Task

    loader = RWKV070ModelLoader("split-invariance.pth", state_dict={k: v.cpu() for k, v in
                                                                 sd.items()},
                                device="cuda", dtype="fp16", split_invariant=invariant)
    gen = torch.Generator().manual_seed(1)
    first = torch.randint(300, 60000, (700,), generator=gen).tolist()
    first[200] = first[650] = 261  # turn boundaries ("\n\n"): kept for later requests
    second = first + torch.randint(300, 60000, (150,), generator=gen).tolist()

    def run(prompts, cache):
        sched = DynamicScheduler(loader, max_batch_size=2, buffer_size=4, prefix_cache=cache)
        tasks = []
        for p in prompts:
            task = Task(list(p), max_tokens=6, temperature=0.0)
            task.cache_origin = ""
            sched.add_task(task)
            sched.run()
            tasks.append(task)
        return tasks[-1], sched

    plain, _ = run([second], None)
    cached, sched = run([first, second], PrefixCache(1 << 30))
    assert plain.wait(60) and cached.wait(60)  # (their states copied home)
    stats = sched.prefix_cache.stats()
    assert stats["hits"] == 1 and (stats["tokens_saved"] % 16 == 0) == invariant
    bits = torch.equal(cached.state.wkv, plain.state.wkv) and torch.equal(
        cached.state.shift, plain.state.shift)
    assert bits == invariant
    if invariant:
        assert cached.output == plain.output


@pytest.mark.parametrize("length", [33, 705])
def test_a_prompt_cached_but_for_its_last_token_ends_in_the_uncached_bits(sd, length):
    """The cache holds the state after all but the last token (a max_tokens 0 request stored
    it): the same prompt that decodes feeds that token in a pass of its own (a 16-row graph
    bucket) and ends, prompt and six decoded tokens, in the bits of the prompt's one pass
    without the cache (session 36: the token went through a decode step before, other bits)."""
    from server.model.loader import RWKV070ModelLoader
    from server.scheduler import DynamicScheduler
    from server.scheduler.prefix_cache import PrefixCache
    from server.task.task import Task

    loader = RWKV070ModelLoader("split-invariance.pth", state_dict={k: v.cpu() for k, v in
                                                                 sd.items()},
                                device="cuda", dtype="fp16")
    prompt = torch.randint(300, 60000, (length,), generator=torch.Generator().manual_seed(2))
    prompt = prompt.tolist()

    def run(max_tokens_list, cache):
        sched = DynamicScheduler(loader, max_batch_size=2, buffer_size=4, prefix_cache=cache)
        for m in max_tokens_list:
            task = Task(list(prompt), max_tokens=m, temperature=0.0)
            task.cache_origin = ""
            sched.add_task(task)
            sched.run()
        assert task.wait(60)
        return task, sched

    plain, _ = run([6], None)
    cached, sched = run([0, 6], PrefixCache(1 << 30))
    assert sched.prefix_cache.stats()["hits"] == 1
    assert sched.prefiller.prefilled_tokens == length  # length - 1, then the last alone
    assert torch.equal(cached.state.wkv, plain.state.wkv)
    assert torch.equal(cached.state.shift, plain.state.shift)
    assert cached.output == plain.output


@pytest.mark.parametrize("beside", [1, 2, 3])
def test_a_prompts_first_logits_are_its_own_whatever_is_fed_beside_it(sd, beside):
    """The CPU form (test_prefix_cache.py) on the fused fp16 path: fed beside others in one
    pass, a prompt has the first logits and state it has alone, as long as the pass keeps each
    row's bits (``RWKV7.pass_keeps_bits``: past #SMs / H rows the Triton WKV takes its token
    loop, other bits, and the prefix cache keeps no state of such a pass; on the H100, 4 rows
    at 2.9B's 40 heads differed by ~3e-3, session 50)."""
    model = RWKV7(sd, infer_config(sd), device="cuda", dtype=torch.float16)
    gen = torch.Generator().manual_seed(3)
    a = torch.randint(300, 60000, (40,), generator=gen).tolist()
    others = [torch.randint(300, 60000, (20,), generator=gen).tolist() for _ in range(beside)]
    alone, one = model.prefill([a], model.new_state(1)), model.new_state(1)
    model.prefill([a], one)
    fed, state = model.prefill([a, *others], model.new_state(1 + beside)), model.new_state(
        1 + beside)
    model.prefill([a, *others], state)
    if not model.pass_keeps_bits(1 + beside):
        assert not torch.equal(state.wkv[:, 0], one.wkv[:, 0])  # (what the check is for)
        return
    assert torch.equal(fed[0], alone[0])
    assert torch.equal(state.wkv[:, 0], one.wkv[:, 0])
    assert torch.equal(state.shift[:, :, 0], one.shift[:, :, 0])


@pytest.mark.parametrize("rows", [2, 4, 5, 16, 17, 64, 160])
def test_the_head_gives_a_row_its_bits_at_any_row_count(sd, rows):
    """The head on the fused path: the skinny-product kernel up to ``gemv_rows`` (4) rows,
    cuBLAS above, with fp32 out; a row's logits have the bits they have alone (what
    ``RWKV7._row_logits`` relies on there; the CPU's BLAS did not keep them, session 49)."""
    model = RWKV7(sd, infer_config(sd), device="cuda", dtype=torch.float16)
    x = torch.randn(rows, sd["emb.weight"].shape[1], device="cuda",
                    generator=torch.Generator(device="cuda").manual_seed(4))
    many = model._row_logits(x)
    for i in (0, rows // 2, rows - 1):
        assert torch.equal(many[i], model._row_logits(x[i:i + 1])[0])


@pytest.mark.parametrize("length", [97, 65])
@pytest.mark.parametrize("seeded", [False, True])
def test_a_prompt_whose_feed_fills_the_budget_ends_as_without_the_cache(sd, length, seeded):
    """The CPU form (test_prefix_cache.py) on the fused fp16 path with its graphs: resumed at 32
    tokens, the prompt has 64 + 1 (or 32 + 1) left at a step budget of 64; the last token goes
    with the pass, one past the budget (a pass of the chunk, then one of one token), and the
    reply and final state have the bits of the prompt fed without the cache."""
    from model_cases import after_a_template

    from server.model.loader import RWKV070ModelLoader
    from server.scheduler.prefix_cache import PrefixCache

    loader = RWKV070ModelLoader("split-invariance.pth", state_dict={k: v.cpu() for k, v in
                                                                 sd.items()},
                                device="cuda", dtype="fp16")
    gen = torch.Generator().manual_seed(5)
    full = torch.randint(300, 20000, (length,), generator=gen).tolist()
    kw = dict(temperature=1.0, top_p=1.0, top_k=0, seed=7) if seeded else dict(temperature=0.0)
    cache = PrefixCache(1 << 30)
    tpl = full[:32] + [299]  # stores the state after 32 tokens
    off, on = (after_a_template(loader, tpl, full, c, **kw) for c in (None, cache))
    assert cache.stats()["hits"] >= 1
    assert on.output == off.output
    assert torch.equal(on.state.wkv, off.state.wkv)
    assert torch.equal(on.state.shift, off.state.shift)
