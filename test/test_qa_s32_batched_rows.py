"""Session 32 QA: a split-invariant prefill pass of several prompts gives each prompt the bits a
pass of its own gives it, also with more than one CPU thread (the server's default: torch uses
every core). The row-count check (``row_invariance.plain_slices``) covers products of up to the
model's prefill chunk of rows, but a batched pass multiplies B x T rows at once: on the 2-core
test machine, at 2 threads, the FFN value product of a C = 768 model (K = 3,072) rounded rows
otherwise past 384 rows, so a prefix-cached state computed in a batched pass (a branch point)
differed from an uncached lone prefill of the same tokens."""

import random

import pytest
import torch

from server.model.forward import RWKV7
from server.model.random import make_random_state_dict
from server.model.checkpoint import infer_config


@pytest.fixture(scope="module")
def c768():
    sd = make_random_state_dict(2, 768, 1024, seed=3)  # (layer 1 reads layer 0's FFN)
    return sd, infer_config(sd)


def test_batched_pass_keeps_each_prompts_bits_at_two_threads(c768):
    sd, cfg = c768
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model = RWKV7(sd, cfg, device="cpu")
        assert model.split_invariant
        rng = random.Random(0)
        p, q = ([rng.randrange(1, 1024) for _ in range(300)] for _ in range(2))
        alone = model.new_state(1)
        model.prefill([p], alone, logits=False)
        both = model.new_state(2)
        model.prefill([p, q], both, logits=False)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(both.wkv[:, :1], alone.wkv)
    assert torch.equal(both.shift[:, :, :1], alone.shift)
