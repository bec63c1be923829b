"""Prompt scoring (completions ``echo`` with ``logprobs``) against a plain prefill of the same
tokens: what scoring a text costs.

    python -m server.bench score --preset 2.9b --tokens 1024,4096          # on the GPU machine
    python -m server.bench score --preset 0.1b --tokens 512 --device cpu --dtype fp32

Per length: the tokens through the scheduler's scoring job as served (``ScoreJob``: steps of
``--chunk`` tokens, by default the scheduler's ``PREFILL_CHUNK`` of the device, from a scratch
state; ``RWKV7.score`` runs each in passes of the model's prefill chunk, from the prefill
graphs on CUDA, every position's residual kept, the head and a
log-softmax over ``--top`` alternatives a block of 256 positions at a time) and through
``RWKV7.prefill`` (graphs where the server uses them; the last position's head only), each
timed whole (device synchronised), median of ``--repeat`` after a warm-up. ``eager ms``: the
scoring job with the prefill graphs put aside (eager passes of the model's prefill chunk,
bound by the host's launch rate on the GPU; before session 45 the job ran one eager pass of
the scheduler's chunk; on the CPU there are no graphs). ``head share``:
the FLOPs of the head over all positions against the model's per token.
"""

from __future__ import annotations

import argparse
import statistics

from server.bench import common
from server.model.presets import PRESETS


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.bench score", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="2.9b", choices=PRESETS)
    p.add_argument("--tokens", default="1024,4096", help="comma-separated prompt lengths")
    p.add_argument("--top", type=int, default=1, help="alternatives a token (0-20)")
    p.add_argument("--chunk", type=int, default=None,
                   help="tokens a pass (default: the scheduler's, as served: 4096 on CUDA, "
                        "512 on the CPU)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dtype", default="fp16", choices=common.DTYPES)
    p.add_argument("--device", default=None, type=common.device_arg)
    args = p.parse_args(argv)
    from server.scheduler.base import PREFILL_CHUNK
    from server.scheduler.scoring import ScoreJob

    model = common.build_model(args.preset, args.device, args.dtype, "fp32")
    chunk = args.chunk or PREFILL_CHUNK.get(model.device.type, PREFILL_CHUNK["cpu"])
    head_share = model.head.numel() / common.matmul_params(model)  # (of a token's FLOPs)
    print(f"# score · {args.preset} {model.dtype} · passes of {chunk} tokens, top {args.top} · "
          f"{common.gpu_name()}", flush=True)

    def score(tokens):
        job = ScoreJob(tokens, args.top)
        while not job.step(model, chunk):
            pass
        job.finish()
        return job.future.result()

    def prefill(tokens):
        model.prefill([tokens], model.new_state(1))

    def eager(tokens):
        graphs, model._graphed_prefill = model._graphed_prefill, None
        try:
            return score(tokens)
        finally:
            model._graphed_prefill = graphs

    rows = []
    for n in map(int, args.tokens.split(",")):
        tokens = [1000 + (7 * i) % 50000 for i in range(n)]
        out = []
        for fn in (score, prefill, eager):
            fn(tokens)  # warm-up (compilation, graph capture)
            times = [common.timed(lambda: fn(tokens), model.device)[0]
                     for _ in range(args.repeat)]
            out.append(statistics.median(times))
        rows.append([n, f"{out[0] * 1e3:,.1f}", f"{n / out[0]:,.0f}", f"{out[1] * 1e3:,.1f}",
                     f"{n / out[1]:,.0f}", f"{out[0] / out[1]:.2f}", f"{out[2] * 1e3:,.1f}",
                     f"{head_share:.0%}"])
        print(" ".join(map(str, rows[-1])), flush=True)
    print(common.table(["tokens", "score ms", "scored tok/s", "prefill ms", "prefill tok/s",
                        "score / prefill", "eager ms", "head share"], rows), flush=True)


if __name__ == "__main__":
    main()
