"""Session 64: what a longest prefill graph of 512 tokens (the model's prefill_chunk) instead of
1,024 costs. A served 2.9B at batch 256 then holds ~128 MiB less after its start (rest_split.py
--graph-tokens 512). Times model.prefill (as the engine runs it: graphs for one sequence) for
prompts of 152 / 600 / 1,000 / 4,096 tokens and 16 x 1,024, chunk 1,024 and 512 alternating on
one model (medians of 7 after a warm-up), fp16 weights and state.

    CUBLAS_WORKSPACE_CONFIG=:4096:2 CUBLASLT_WORKSPACE_SIZE=4096 \
        python3 docs/experiments/session64/chunk_ab.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[3])]


def main() -> None:
    import torch

    from server.bench import common

    model = common.build_model("2.9b", "cuda", "fp16", "fp16")
    V = model.cfg.vocab_size
    g = torch.Generator().manual_seed(0)
    cases = [(1, 152), (1, 600), (1, 1000), (1, 4096), (16, 1024)]
    prompts = {c: [torch.randint(1, V, (c[1],), generator=g).tolist() for _ in range(c[0])]
               for c in cases}
    res = {}
    for rnd in range(2):
        for chunk in (1024, 512):
            model.prefill_chunk = model._graphed_prefill.max_tokens = chunk
            for c in cases:
                st = model.new_state(c[0])
                run = lambda: model.prefill(prompts[c], st, logits=True)  # noqa: E731
                run()
                t = [common.timed(run, model.device)[0] * 1e3 for _ in range(7)]
                res.setdefault((chunk, c), []).append(statistics.median(t))
                print(f"round {rnd} chunk {chunk} {c[0]}x{c[1]}: {statistics.median(t):.2f} ms",
                      flush=True)
    print("| case | chunk 1,024 ms | chunk 512 ms | 512 / 1,024 |")
    for c in cases:
        a, b = (min(res[(k, c)]) for k in (1024, 512))
        print(f"| {c[0]} x {c[1]} | {a:.2f} | {b:.2f} | {b / a:.3f} |")
    print(f"prefill graphs: {sorted(model._graphed_prefill.graphs)}")


if __name__ == "__main__":
    main()
