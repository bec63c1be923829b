"""``python -m server.bench sample`` and ``large``: registered; on a machine without CUDA they
stop with a message naming what they need instead of a traceback (their timing runs on the GPU
machine)."""

import pytest
import torch

from server.bench import large, sample


@pytest.mark.parametrize("name,bench", [("sample", sample), ("large", large)])
def test_bench_is_registered_and_says_it_needs_cuda(monkeypatch, name, bench):
    from server.bench.__main__ import BENCHES

    assert name in BENCHES
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="needs a CUDA device"):
        bench.main(["--batch", "1"])
