"""Session 67: what ``checkpoint.weights_digest`` costs at start. A random checkpoint of
``--preset`` is written with ``torch.save`` and read back memory-mapped by the server's own
``load_checkpoint`` (the page cache warm, the file just written); the digest is timed
``--reps`` times, and once over an in-memory bf16 state dict.

    PYTHONPATH=. uv run python docs/experiments/session67/digest_time.py --preset 0.1b
"""

import argparse
import tempfile
import time
from pathlib import Path

import torch

from server.model.checkpoint import load_checkpoint, weights_digest
from server.model.random import PRESETS, make_random_state_dict


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="0.1b")
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    sd = make_random_state_dict(*PRESETS[args.preset], seed=0, dtype=torch.bfloat16,
                                device="cpu")
    t = time.perf_counter()
    weights_digest(sd)
    print(f"{args.preset}: {len(sd)} tensors; in memory {(time.perf_counter() - t) * 1e3:.1f} ms")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "ck.pth"
        torch.save(sd, path)
        del sd
        mapped, _ = load_checkpoint(path)
        for i in range(args.reps):
            t = time.perf_counter()
            digest = weights_digest(mapped)
            print(f"memory-mapped, run {i + 1}: {(time.perf_counter() - t) * 1e3:.1f} ms "
                  f"({digest})")


if __name__ == "__main__":
    main()
