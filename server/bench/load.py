"""How long a model takes to load, then to prefill its first prompt, with and without the
load-time check that every weight is finite after its cast (``checkpoint.finite_weight``).

    python -m server.bench.load --preset 0.4b --dtype bf16,fp32 --check 1,0 --repeat 2
    python -m server.bench.load --model ck.pth --device cuda --dtype fp16

A random checkpoint of ``--preset`` is written to a temporary file first (bf16, as published)
unless ``--model`` names one. Each run is a fresh process (a cold interpreter, the file in the
page cache after the first): ms to ``RWKV070ModelLoader`` returning, then to a 64-token prefill.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from server.bench import common
from server.model.presets import PRESETS


def one_run(model: str, device: str, dtype: str, check: bool) -> dict:
    """In this process: load ``model`` and prefill 64 tokens; seconds of each."""
    import server.model.forward as forward
    import server.model.layer_weights as layer_weights

    if not check:
        for mod in (forward, layer_weights):
            mod.finite_weight = lambda key, cast, stored: cast
    from server.model.loader import RWKV070ModelLoader

    t0 = time.perf_counter()
    loader = RWKV070ModelLoader(model, device=device, dtype=dtype)
    t1 = time.perf_counter()
    m = loader.model
    m.prefill([list(range(1, 65))], m.new_state(1))
    if m.device.type == "cuda":
        import torch

        torch.cuda.synchronize()
    return {"load_s": t1 - t0, "prefill_s": time.perf_counter() - t1}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m server.bench.load", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a checkpoint (default: a random one of --preset)")
    ap.add_argument("--preset", default="0.4b", choices=PRESETS)
    ap.add_argument("--device", default="cpu", type=common.device_arg)
    ap.add_argument("--dtype", default="bf16", type=common.dtype_list,
                    help="comma-separated run dtypes")
    ap.add_argument("--check", default="1,0", help="1: the finite-weight check on, 0: off")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--one", nargs=4, metavar=("MODEL", "DEVICE", "DTYPE", "CHECK"),
                    help=argparse.SUPPRESS)  # (a child run)
    args = ap.parse_args(argv)
    if args.one:
        model, device, dtype, check = args.one
        print(json.dumps(one_run(model, device, dtype, check == "1")))
        return
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            model = str(Path(tmp) / f"random-{args.preset}.pth")
            from server.model.random import main as write_random

            write_random([model, "--preset", args.preset])
        print(f"model {model}, device {args.device}; seconds, one fresh process a run")
        print("| dtype | check | load s | first 64-token prefill s |")
        print("|---|---|---|---|")
        for _ in range(args.repeat):
            for dtype in args.dtype.split(","):
                for check in args.check.split(","):
                    out = subprocess.run([sys.executable, "-m", "server.bench.load", "--one",
                                          model, args.device, dtype, check],
                                         capture_output=True, text=True, check=True)
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    print(f"| {dtype} | {'on' if check == '1' else 'off'} | {r['load_s']:.2f} "
                          f"| {r['prefill_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
