#!/usr/bin/env bash
# Session 52, GPU call 4: only on an H200 (exits 3 at once on another card): the refresh of
# decode, the seed's stress test, prefill, the cached turn's pass and issue 7 over HTTP on the
# final code, on the card of the issues' targets.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
OUT=$OUT STEPS="decode stress prefill prefill152 chat_raw" timeout 400 bash server/bench/gpu_all.sh \
  > /dev/null 2>&1
grep -E "^===" "$OUT/summary.txt"
