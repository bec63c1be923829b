#!/usr/bin/env bash
# Session 50, GPU call 1: session 49's CPU-found prefix-cache fixes on CUDA (new GPU tests),
# before and after head_rows.diff, then every CUDA test with the diff applied.
set -u
OUT=${OUT:-/tmp/out}
K="whatever or fills_the_budget"
python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -rA test/test_split_invariance_gpu.py \
  -k "$K" > "$OUT/new_tests_before.log" 2>&1
echo "before: rc=$?"; tail -3 "$OUT/new_tests_before.log"
patch -p1 < docs/experiments/session50/head_rows.diff || exit 1
python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -rA test/test_split_invariance_gpu.py \
  -k "$K" > "$OUT/new_tests_after.log" 2>&1
echo "after: rc=$?"; tail -3 "$OUT/new_tests_after.log"
OUT=$OUT STEPS="tests" timeout 420 bash server/bench/gpu_all.sh > /dev/null 2>&1
tail -5 "$OUT/summary.txt"
