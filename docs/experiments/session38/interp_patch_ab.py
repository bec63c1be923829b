"""Wall time of test_fused_path_in_interpreter's script through ``run_interpreted``, with Triton's
interpreter as it is (RWKV_TEST_PLAIN_INTERPRETER=1) and with test/interpreter_patch.py, in
turn; prints each run's time and the error figures the script prints (they must be equal).

    OMP_NUM_THREADS=1 PYTHONPATH=.:test \
        uv run python docs/experiments/session38/interp_patch_ab.py [rounds]
"""
import os
import sys
import time

from model_cases import run_interpreted
from test_fused_kernels import _INTERPRETED

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
figures = {}
for r in range(rounds):
    for plain in ("1", "0"):
        os.environ["RWKV_TEST_PLAIN_INTERPRETER"] = plain
        t0 = time.perf_counter()
        out = run_interpreted(_INTERPRETED, timeout=900)
        dt = time.perf_counter() - t0
        lines = [ln for ln in out.stdout.splitlines() if "rel err" in ln]
        figures.setdefault(plain, lines)
        print(f"round {r + 1} {'plain  ' if plain == '1' else 'patched'}: {dt:6.1f} s")
print("error figures equal:", figures["1"] == figures["0"])
for line in figures["0"]:
    print("  " + line)
