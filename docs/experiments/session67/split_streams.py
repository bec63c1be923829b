"""Session 67: does a batch-1,024 decode step get faster as two half batches on two streams?

Issue 5's batch-1,024 target misses by ~10 % on the H200 with the step's phases in series: per
layer the products (compute-bound, ~8.8 ms a step) and the time mix (streaming the state,
memory-bound, ~7.1 ms) run one after the other. Two half batches have no data dependency, so
on two streams one half's products can run beside the other's time mix. This measures whole
decode steps (the model's forward and head, no sampling), each variant captured as one CUDA
graph and replayed:

  full   one step of B rows (the served form)
  half   one step of B/2 rows (x2 = the two halves in series)
  split  the two halves forked onto two streams inside one graph

The LoRA side stream is off in every variant (the split's two halves would share it). Random
2.9B weights, fp16, fp16 state. Correctness is not checked (the halves' states are separate).

    python3 docs/experiments/session67/split_streams.py --batch 1024 --reps 30 --rounds 3
"""

import argparse
import statistics

import torch

from server.bench import common
from server.model.state import State


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="2.9b")
    p.add_argument("--batch", default="1024", help="comma-separated batch sizes")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    model = common.build_model(args.preset, "cuda", "fp16", "fp16")
    if model._fused is not None:
        model._fused.lora_stream = False
    cfg = model.cfg
    print(f"# {args.preset} · {common.gpu_name()}", flush=True)

    def state(rows):
        st = State.zeros(cfg, rows, "cuda", model.dtype, model.state_dtype)
        st.wkv.normal_(0, 0.1)
        return st

    for B in (int(b) for b in args.batch.split(",")):
        h = B // 2
        tok = torch.randint(0, cfg.vocab_size, (B,), device="cuda")
        s_full, s_a, s_b = state(B), state(h), state(h)
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

        def full():
            model._decode_step(tok, s_full, None)

        def half():
            model._decode_step(tok[:h], s_a, None)

        def split():
            main = torch.cuda.current_stream()
            for s in (s1, s2):
                s.wait_stream(main)
            with torch.cuda.stream(s1):
                model._decode_step(tok[:h], s_a, None)
            with torch.cuda.stream(s2):
                model._decode_step(tok[h:], s_b, None)
            for s in (s1, s2):
                main.wait_stream(s)

        graphs = {name: common.cuda_graph(fn) for name, fn in
                  (("full", full), ("half", half), ("split", split))}
        res = {name: [] for name in graphs}
        for _ in range(args.rounds):  # alternating, so drift hits every variant alike
            for name, g in graphs.items():
                us = common.replay_us(g, args.reps)
                res[name].append(statistics.median(us) / 1e3)
        for name, ms in res.items():
            line = " / ".join(f"{m:.3f}" for m in ms)
            rows = B if name != "half" else h
            best = min(ms)
            print(f"batch {B} {name:5s}: {line} ms a step (median of {args.reps} replays, each "
                  f"round); best {best:.3f} ms, {rows / best * 1e3:,.0f} tok/s", flush=True)
        print(f"batch {B}: split / full {min(res['split']) / min(res['full']):.3f}, "
              f"2 x half / full {2 * min(res['half']) / min(res['full']):.3f}", flush=True)
        del graphs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
