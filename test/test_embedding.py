"""The embedding table (ln0 folded in) and its lookup: an ordinary tensor on the CPU; on CUDA
pinned host memory that a Triton kernel reads over the bus (here in Triton's CPU interpreter;
on the device in the gpu-marked test)."""

import pytest
import torch
import torch.nn.functional as F

from model_cases import run_interpreted
from server.model.embedding import build_table, embed, host_table
from server.model.reference import LN_EPS


def test_table_is_ln0_of_the_embedding_and_lookup_indexes_it():
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(300, 64, generator=g)
    w, b = torch.randn(64, generator=g), torch.randn(64, generator=g)
    table = build_table(emb, w, b, LN_EPS, torch.device("cpu"), torch.bfloat16, rows=128)
    want = F.layer_norm(emb, (64,), w, b, LN_EPS).to(torch.bfloat16)  # (slices of 128 rows)
    assert table.dtype == torch.bfloat16 and torch.equal(table, want)
    tokens = torch.tensor([[5, 299, 0], [5, 5, 7]])
    x = embed(table, tokens)
    assert x.shape == (2, 3, 64) and x.dtype == torch.float32
    assert torch.equal(x, want[tokens].float())
    from server.model import kernels

    assert not host_table(torch.device("cpu"))
    assert host_table(torch.device("cuda", 1)) == kernels.HAS_TRITON


def test_without_triton_a_cuda_table_stays_on_the_device(monkeypatch):
    from server.model import kernels

    monkeypatch.setattr(kernels, "HAS_TRITON", False)  # (its kernel could not read the host)
    assert not host_table(torch.device("cuda"))


def test_a_refused_pinned_block_leaves_the_table_on_the_device(monkeypatch):
    """Pinned host memory capped (WSL2, some containers) or exhausted: the table is made on
    the model's device instead (``embed`` indexes it there), with a warning, not a failed
    start reading "out of memory loading the model"."""
    from loguru import logger

    from server.model import embedding

    real_empty = torch.empty

    def empty(*shape, pin_memory=False, **kw):
        if pin_memory:
            raise RuntimeError("CUDA error: out of memory (pinned)")
        return real_empty(*shape, **kw)

    monkeypatch.setattr(embedding, "host_table", lambda device: True)
    monkeypatch.setattr(embedding.torch, "empty", empty)
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    try:
        emb = torch.randn(40, 64, generator=torch.Generator().manual_seed(4))
        table = build_table(emb, torch.ones(64), torch.zeros(64), LN_EPS, torch.device("cpu"),
                            torch.float16)
    finally:
        logger.remove(sink)
    assert table.device.type == "cpu" and not table.is_pinned()
    assert torch.equal(table, F.layer_norm(emb, (64,), eps=LN_EPS).half())
    assert len(lines) == 1 and "stays on cpu" in lines[0] and "refused" in lines[0], lines


def test_the_kernel_gets_the_ids_contiguous(monkeypatch):
    """A column slice of [B, T] ids (B > 1) flattens to a strided view; the kernel reads ids
    one after another, so embed hands it a contiguous copy (a strided view read row 1 as the
    wrong id). The table and ids on two devices stand in for host memory and CUDA."""
    pytest.importorskip("triton")
    from server.model.kernels import embed_triton

    seen = []

    def spy(table, idx, out):
        seen.append(idx.is_contiguous())
        return out

    monkeypatch.setattr(embed_triton, "rows_into", spy)
    tokens = torch.zeros(2, 5, dtype=torch.long, device="meta")[:, :1]
    x = embed(torch.zeros(10, 8), tokens)
    assert seen == [True] and x.shape == (2, 1, 8) and x.dtype == torch.float32


_INTERPRETED = """
import torch
from server.model.kernels.embed_triton import rows_into
g = torch.Generator().manual_seed(1)
for C in (700, 512):  # a row a partial block, a row whole blocks
    table = torch.randn(50, C, generator=g).half()
    idx = torch.tensor([3, 0, 49, 3])
    out = torch.full((4, C), float("nan"))
    assert rows_into(table, idx, out) is out
    assert torch.equal(out, table[idx].float()), C
empty = torch.empty(0, 700)
assert rows_into(table, idx[:0], empty).shape == (0, 700)
# ids outside the table read nothing: zero rows (the rows inside as before)
out = torch.full((4, C), float("nan"))
rows_into(table, torch.tensor([50, 7, -1, 1 << 40]), out)
assert torch.equal(out[1], table[7].float()) and not out[[0, 2, 3]].any()
print("rows ok")
"""


def test_rows_kernel_in_interpreter():
    pytest.importorskip("triton")
    assert "rows ok" in run_interpreted(_INTERPRETED, timeout=300).stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_table_in_pinned_host_memory_read_by_the_device():
    from server.model.kernels.embed_triton import rows_into

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(2)
    emb = torch.randn(4096, 2560, device=dev, generator=g)
    w, b = torch.ones(2560, device=dev), torch.zeros(2560, device=dev)
    table = build_table(emb, w, b, LN_EPS, dev, torch.float16)
    assert table.device.type == "cpu" and table.is_pinned()
    want = table.to(dev)
    tokens = torch.randint(0, 4096, (3, 700), device=dev, generator=g)
    x = embed(table, tokens)
    assert x.device == tokens.device and torch.equal(x, want[tokens].float())
    col = tokens[:, :1]  # ids not contiguous once flattened
    assert torch.equal(embed(table, col), want[col].float())
    # inside a CUDA graph: the replay reads the ids then in the table
    idx = tokens[0, :256].clone()
    out = torch.empty(256, 2560, device=dev)
    rows_into(table, idx, out)  # (compiled before the capture)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        rows_into(table, idx, out)
    idx.copy_(tokens[1, :256])
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want[tokens[1, :256]].float())
