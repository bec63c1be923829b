"""The CUDA engine's one-launch step bookkeeping (kernels/pulse_triton.py) against the torch code
of BatchEngine._step_begin/_step_end that defines it: random slots (live, done, stop requests,
rows exempt from stops, tokens that end a turn, max_tokens reached, a drawn token whose logit is
NaN or infinite), through Triton's CPU interpreter and (marker gpu) on CUDA; every output tensor
must be equal."""

import pytest
import torch

CHECK = """
import types
import torch
from server.model.kernels import pulse_triton
from server.scheduler import engine as E

dev = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator().manual_seed(0)
def ints(n, *vals):
    return torch.tensor(vals, dtype=torch.long)[torch.randint(len(vals), (n,), generator=g)]
broken_seen = 0
for trial in range(20):
    n, steps, s = 37, 4, trial % 4
    # (11: one newline; 28329: "。" and a newline, after which 11 makes a blank line)
    cur = ints(n, 5, 11, E.TURN_NEWLINE, 7, *E.NEWLINE_ENDED)
    tok = ints(n, 0, E.USER_TOKEN, 9, 11, E.TURN_NEWLINE, 28329)
    n_gen = torch.randint(0, 5, (n,), generator=g)
    max_new = torch.randint(1, 7, (n,), generator=g)
    # (no turn stop: fill-in-the-middle; 11: the token before cur ended in a newline)
    turn = ints(n, E.TURN_NEWLINE, E.NEWLINE, E.NO_TURN)
    done = torch.rand(n, generator=g) < 0.3
    stop = torch.rand(n, generator=g) < 0.3
    reason = ints(n, 0, 0, 0, E.REASON_EOS)
    out = torch.randint(0, 9, (n, steps), generator=g)
    valid = torch.rand(n, steps, generator=g) < 0.5
    nostop = None if trial % 2 else torch.tensor([1, 4, 20])
    # the model's logits: the drawn token's NaN / +inf / -inf in some rows (the row breaks),
    # a NaN elsewhere in others (it does not); rows of a wider buffer (a row stride > V)
    V = 28_330
    padded = torch.randn(n, V + 3, generator=g)  # (sliced on the device, below)
    logits = padded[:, :V]
    odd = torch.rand(n, generator=g)
    for r in range(n):
        if odd[r] < 0.3:
            logits[r, tok[r]] = (float("nan"), float("inf"), float("-inf"))[r % 3]
        elif odd[r] < 0.45:
            logits[r, (tok[r] + 1) % V] = float("nan")
    seen = []
    results = []
    for kernels in (None, pulse_triton):
        t = [x.clone().to(dev) for x in (cur, tok, n_gen, max_new, done, stop, reason, out, valid,
                                         turn)]
        eng = types.SimpleNamespace(cur=t[0], n_gen=t[2], max_new=t[3], stop_dev=t[5],
                                    turn=t[9], _kernels=kernels)
        rows = None if nostop is None else nostop.to(dev)
        active = E.BatchEngine._step_begin(eng, t[4], t[6], rows)
        E.BatchEngine._step_end(eng, t[1], padded.to(dev)[:, :V], active, t[4], t[6], t[7],
                                t[8], s)
        results.append([active] + t)
        seen.append(int((t[6] == E.REASON_NONFINITE).sum()))
    for a, b in zip(*results):
        assert a.dtype == b.dtype and torch.equal(a.cpu(), b.cpu()), (trial, a, b)
    broken_seen += seen[0]
assert broken_seen >= 20, broken_seen  # (the case is exercised)
print("pulse kernels ok")
"""


def test_pulse_kernels_in_interpreter():
    pytest.importorskip("triton")
    from model_cases import run_interpreted

    assert "pulse kernels ok" in run_interpreted(CHECK, timeout=120).stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_pulse_kernels_on_cuda(capsys):
    exec(CHECK, {})
    assert "pulse kernels ok" in capsys.readouterr().out
