"""What the idle daemon's give-back of cached device blocks costs the next work (session 71).

A served 2.9B (as ``server.bench memory`` builds it: run.py's CUDA settings, batch 256, fp16
state): a load of 256 requests to warm up, then rounds of
- a single 158-token request (max_tokens 1; its pass through the prefill graph), timed from
  ``new_task`` to the end, 0.3 s after the previous one (no trim) or 3 s after (trimmed);
- a load of 256 requests right after the previous load (no trim) or 3 s after one (trimmed),
with the device memory reserved before each.
    python3 docs/experiments/session71/trim_cost.py
"""

import os
import sys
import tempfile
import time
from pathlib import Path

from server.config import Settings, cuda_defaults

cuda_defaults(os.environ)
import torch  # noqa: E402

from server.api.lifecycle import build_runtime, close_runtime  # noqa: E402
from server.bench.memory import run_load  # noqa: E402
from server.scheduler.idle_trim import IDLE_S  # noqa: E402

GIB = 2**30


def single(scheduler) -> float:
    t = time.perf_counter()
    task = scheduler.new_task(prompt=[1000 + i for i in range(158)], max_tokens=1)
    assert task.wait(60)
    return (time.perf_counter() - t) * 1e3


def main() -> None:
    from loguru import logger

    logger.add(sys.stdout, level="DEBUG", filter=lambda r: r["message"].startswith("idle:"))
    with tempfile.TemporaryDirectory() as tmp:
        rt = build_runtime(Settings(demo="2.9b", max_batch_size=256, state_dtype="fp16",
                                    task_db_path=str(Path(tmp) / "tasks.db")))
        try:
            s = rt.scheduler
            run_load(s, 256, 64)
            print("| round | pause s | give-backs so far | reserved GiB before | what | ms |")
            print("|---|---|---|---|---|---|")
            for r in range(3):
                for pause in (0.3, IDLE_S + 1.0):
                    for _ in range(3):
                        time.sleep(pause)
                        res = torch.cuda.memory_reserved() / GIB
                        print(f"| {r} | {pause:g} | {s._idle_trim.gave_back} | {res:.2f} | 1 x 158 | "
                              f"{single(s):.2f} |")
                for pause in (0.0, IDLE_S + 1.0):
                    time.sleep(pause)
                    res = torch.cuda.memory_reserved() / GIB
                    t = time.perf_counter()
                    made = run_load(s, 256, 64)
                    print(f"| {r} | {pause:g} | {s._idle_trim.gave_back} | {res:.2f} | load of 256 "
                          f"({made:,} tokens) | "
                          f"{(time.perf_counter() - t) * 1e3:.0f} |")
        finally:
            close_runtime(rt)


if __name__ == "__main__":
    main()
