"""The reference forward pinned: every fast path is tested against it, so a change to it (or to
a constant the fast paths import from it: a GroupNorm eps of 1e-5 instead of MODEL.md's 64e-5
failed no test; session 41's mutation review) would move both sides together unseen.

The figures below are the reference's output for the tiny random checkpoint (preset tiny, seed
1: ``tiny_model_path``), computed once on the CPU (session 41) by the reference as it stood
(written line by line from MODEL.md): the 16 largest logits after a 9-token prompt and the
state's sums. Only a deliberate change to the reference may change them. The tolerance (1.5e-5
on values near 8) is above fp32's rounding with another summation order and below the change
that either norm's eps makes (GroupNorm 64e-5 -> 1e-5: 8.8e-5 on these logits; LayerNorm
1e-5 -> 1e-6: 4.7e-5)."""

import torch

from server.model.checkpoint import load_checkpoint
from server.model.reference import ReferenceRWKV7

PROMPT = [24281, 59, 33, 3319, 11, 261, 5585, 41693, 59]
TOP_IDS = [18378, 29005, 40182, 13485, 35869, 39919, 56266, 60734, 20276, 48775, 30096, 59178,
           12527, 41325, 40209, 63745]
TOP_VALUES = [8.819047, 8.614435, 8.040206, 7.965323, 7.905849, 7.812353, 7.806782, 7.730329,
              7.706188, 7.602084, 7.556376, 7.520047, 7.390028, 7.342016, 7.274621, 7.272884]
WKV_ABS_SUM, SHIFT_ABS_SUM = 8016.1572, 405.9520


def test_the_reference_forward_gives_its_pinned_output(tiny_model_path):
    sd, cfg = load_checkpoint(tiny_model_path)
    ref = ReferenceRWKV7(sd, cfg)
    state = ref.zero_state()
    logits = ref.forward_seq(PROMPT, state)
    assert logits.shape == (65536,)
    assert torch.topk(logits, 16).indices.tolist() == TOP_IDS
    got = logits[TOP_IDS]
    assert torch.allclose(got, torch.tensor(TOP_VALUES), rtol=0, atol=1.5e-5), \
        (got - torch.tensor(TOP_VALUES)).abs().max()
    assert abs(float(state.wkv.abs().sum()) - WKV_ABS_SUM) < 0.05
    assert abs(float(state.shift.abs().sum()) - SHIFT_ABS_SUM) < 0.005
