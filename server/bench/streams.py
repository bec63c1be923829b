"""A decode step split into row groups on parallel CUDA streams (run on the GPU machine).

    python -m server.bench streams --preset 2.9b --batch 1024,256 --splits 1,2,4

At batch 1,024 a step's matrix products are compute-bound (~8.7 ms of ~19 on the H200) and its
time mix is bound by the state's traffic (~7 ms): one after the other, layer after layer, each
leaves the other's resource idle. The rows of a decode step are independent sequences, so the
batch can be cut into groups whose forwards run on their own streams in one CUDA graph: as the
groups drift apart, one group's time mix can run beside another's products. Each table row is
the replay of one graph holding the whole step (forward and head; sampling is not included)
with the rows cut into ``split`` groups, on ``split`` streams ("parallel") or on one stream one
after the other ("serial": the cost of the smaller products alone).
"""

from __future__ import annotations

import argparse

from server.model.presets import PRESETS
import torch

from server.bench import common
from server.bench.wkv import _graph_time_us  # median µs of a CUDA graph replay of fn()
from server.model.state import State


def split_step(model, tokens, state: State, split: int, parallel: bool, streams):
    """fn() running the decode step of every row, cut into ``split`` groups of rows."""
    B = tokens.shape[0]
    n = B // split
    parts = [(tokens[i * n:(i + 1) * n].view(-1, 1),
              State(state.shift[:, :, i * n:(i + 1) * n], state.wkv[:, i * n:(i + 1) * n]))
             for i in range(split)]

    def fn():
        main = torch.cuda.current_stream()
        outs = []
        for (tok, st), s in zip(parts, streams if parallel else [main] * split):
            s.wait_stream(main)
            with torch.cuda.stream(s):
                outs.append(model._logits(model._forward(tok, st, None, None)))
        for s in streams[:split] if parallel else []:
            main.wait_stream(s)
        return outs
    return fn


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="2.9b", choices=PRESETS)
    p.add_argument("--batch", default="1024,256")
    p.add_argument("--splits", default="1,2,4")
    p.add_argument("--state-dtype", default="fp16", choices=common.DTYPES)
    args = p.parse_args(argv)
    model = common.build_model(args.preset, "cuda", "fp16", args.state_dtype)
    streams = [torch.cuda.Stream() for _ in range(8)]
    print(f"# decode step split over streams · {args.preset} · state {args.state_dtype} · "
          f"{common.gpu_name()}", flush=True)
    rows = []
    for B in map(int, args.batch.split(",")):
        state = model.new_state(B)
        tokens = torch.randint(0, model.cfg.vocab_size, (B,), device="cuda")
        base = None
        for split in map(int, args.splits.split(",")):
            for parallel in ((False,) if split == 1 else (True, False)):
                ms = _graph_time_us(split_step(model, tokens, state, split, parallel,
                                               streams), reps=10) / 1e3
                base = base or ms
                rows.append([B, split, "parallel" if parallel else "serial", f"{ms:.2f}",
                             f"{B / ms * 1e3:,.0f}", f"{base / ms:.3f}"])
                print(" ".join(map(str, rows[-1])), flush=True)
        del state
        torch.cuda.empty_cache()
    print(common.table(["batch", "groups", "streams", "ms/step", "tok/s (no sampling)",
                        "speed-up"], rows))


if __name__ == "__main__":
    main()
