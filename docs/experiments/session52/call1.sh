#!/usr/bin/env bash
# Session 52, GPU call 1: every CUDA test of gpu_all.sh on the final code of session 51 (its
# off-grid prefiller cut was never run on CUDA), then the cached turn's 152-token pass by kernel
# and the decode benchmark (last full run: session 44).
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
OUT=$OUT STEPS="${STEPS1:-tests prefill152 decode}" timeout 585 bash server/bench/gpu_all.sh > /dev/null 2>&1
grep -E "^===|passed|failed" "$OUT/summary.txt" | tail -12
