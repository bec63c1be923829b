#!/usr/bin/env bash
# Session 59, call 3: one warm-up stream for every capture (warmup_stream): cuBLAS workspaces
# after a server's captures, with it and with a stream per capture (emulated: `old`); then the
# CUDA tests of the model, its graphs and the prefix cache.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
for mode in "" old; do
  timeout 90 python3 docs/experiments/session59/diag/workspaces.py $mode 2>&1 | grep -v INFO \
    | tee -a "$OUT/workspaces.log" | tail -1
done
timeout 420 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_model_gpu.py \
  test/test_prefix_cache_gpu.py test/test_engine_no_wait_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; tail -3 "$OUT/tests.log"
