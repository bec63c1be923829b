"""Sampler benchmark: one `BatchSampler.sample` step (penalties, temperature, top-k, top-p, the
draw, the update) on random logits, as GPU time (a CUDA-graph replay: no launch overhead) and as
run eagerly (host-bound at small batches), with the CUDA top-k kernels and with torch.topk.

    python -m server.bench sample --batch 1,32,256,1024              # top-k 50, top-p 0.3
    python -m server.bench sample --batch 256 --top-k 20 --top-p 0.9
    python -m server.bench sample --clustered 1   # logits of a context in one script

``--clustered 1``: random logits lowered by 8 outside 1 of every 8 blocks of 1,024 token ids (a
vocabulary ordered by script gives whole blocks of tokens unlikely in a given context; the
threshold of the CUDA top-k must not let them through).

Also checks that both ways draw the same tokens over ``--steps`` steps (seeded rows)."""

from __future__ import annotations

import argparse

import torch

from server.bench import common


def _us(fn, n: int = 50) -> float:
    """Mean µs of ``fn()`` over n back-to-back calls (after 3 warm-up calls)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(n):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / n * 1e3


def _graph_us(fn) -> float:
    return _us(common.cuda_graph(fn).replay)


def _sampler(B: int, V: int, args, fused_topk: bool):
    from server.model.kernels import sampling_triton as st
    from server.model.sampler import BatchSampler, SamplingBatch

    st.TOPK_MAX = 64 if fused_topk else 0  # 0: the torch.topk path
    sampler, batch = BatchSampler(V, "cuda"), SamplingBatch.empty(B, V, "cuda")
    batch.temperature.fill_(args.temperature)
    batch.top_k.fill_(args.top_k)
    batch.top_p.fill_(args.top_p)
    batch.presence.fill_(0.4)
    batch.seed.copy_(torch.arange(B))
    batch.invalidate()
    return sampler, batch


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.bench sample", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", default="1,32,256,1024")
    p.add_argument("--vocab", type=int, default=65536)
    p.add_argument("--top-k", type=int, default=50)
    p.add_argument("--top-p", type=float, default=0.3)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=10, help="steps of the same-tokens check")
    p.add_argument("--clustered", type=int, choices=(0, 1), default=0,
                   help="1: most 1,024-token blocks of the logits lowered by 8")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("server.bench sample: needs a CUDA device (it times the CUDA kernels; "
                         "on the CPU the sampler is the torch path)")
    from server.model.kernels import sampling_triton as st

    rows = []
    try:
        for B in map(int, args.batch.split(",")):
            logits = torch.randn(B, args.vocab, device="cuda", generator=torch.Generator(
                "cuda").manual_seed(B)) * 3
            if args.clustered:
                blocks = logits.view(B, -1, 1024)  # (vocab a multiple of 1,024)
                blocks[:, [j for j in range(blocks.shape[1]) if j % 8]] -= 8.0
            cells, tokens = [], []
            for fused in (True, False):
                sampler, batch = _sampler(B, args.vocab, args, fused)
                tokens.append(torch.stack([sampler.sample(logits, batch)
                                           for _ in range(args.steps)]))
                sampler, batch = _sampler(B, args.vocab, args, fused)
                sampler.sample(logits, batch)  # the plan (one sync) outside the timing
                cells += [f"{_graph_us(lambda: sampler.sample(logits, batch)):.1f}",
                          f"{_us(lambda: sampler.sample(logits, batch)):.1f}"]
            same = "yes" if torch.equal(tokens[0], tokens[1]) else "NO"
            rows.append([B, *cells, same])
    finally:
        st.TOPK_MAX = 64
    print(f"# sample · vocabulary {args.vocab} · top-k {args.top_k} · top-p {args.top_p} · "
          f"temperature {args.temperature} · clustered {args.clustered} · {common.gpu_name()}")
    print(common.table(["batch", "CUDA top-k: GPU µs", "eager µs", "torch.topk: GPU µs",
                        "eager µs", f"same tokens ({args.steps} steps)"], rows), flush=True)


if __name__ == "__main__":
    main()
