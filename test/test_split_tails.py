"""Split invariance where a pass ends anywhere (session 23's QA, on the CPU): a prompt resumed
from an aligned cached state is finished by a pass of any length (1 token, 13, 40 ...), and a
state kept in fp16 is rounded between passes; both must leave the bits of one pass over the
whole prompt, as the prefix cache promises (docs/prefix_cache.md)."""

import pytest
import torch

from server.model.loader import RWKV070ModelLoader


def _tokens(n: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 65000, (n,), generator=g).tolist()


def _after(model, parts: list[list[int]]):
    """(state, logits) after feeding ``parts`` in order, one prefill call each."""
    state = model.new_state(1)
    logits = None
    for p in parts:
        logits = model.prefill([p], state)
    return state, logits


def _same(a, b) -> bool:
    (sa, la), (sb, lb) = a, b
    return torch.equal(sa.wkv, sb.wkv) and torch.equal(sa.shift, sb.shift) and torch.equal(la, lb)


@pytest.mark.parametrize("tail", [1, 2, 5, 13, 15, 16, 17, 40])
def test_a_pass_of_any_length_after_an_aligned_cut(tiny_loader, tail):
    model = tiny_loader.model
    align = model.prefill_align
    toks = _tokens(2 * align + tail)
    assert _same(_after(model, [toks]), _after(model, [toks[:align], toks[align:]]))
    assert _same(_after(model, [toks]), _after(model, [toks[:2 * align], toks[2 * align:]]))


@pytest.fixture(scope="module")
def fp16_state_loader(tiny_model_path):
    return RWKV070ModelLoader(tiny_model_path, device="cpu", state_dtype="fp16")


@pytest.mark.parametrize("cut,total", [(64, 200), (128, 300), (64, 129), (96, 300)])
def test_an_fp16_state_ends_in_the_same_bits_however_the_prompt_is_cut(fp16_state_loader, cut,
                                                                         total):
    model = fp16_state_loader.model
    assert model.state_dtype == torch.float16
    toks = _tokens(total, seed=1)
    assert _same(_after(model, [toks]), _after(model, [toks[:cut], toks[cut:]]))
