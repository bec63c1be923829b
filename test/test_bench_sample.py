"""``python -m server.bench sample``: registered; on a machine without CUDA it stops with a
message naming what it needs instead of a traceback (its timing runs on the GPU machine)."""

import pytest
import torch

from server.bench import sample


def test_sample_bench_is_registered_and_says_it_needs_cuda(monkeypatch):
    from server.bench.__main__ import BENCHES

    assert "sample" in BENCHES
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="needs a CUDA device"):
        sample.main(["--batch", "1"])
