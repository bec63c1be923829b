#!/usr/bin/env bash
# Session 53, GPU call 1: only on an H200 (exits 3 at once on another card): the refresh of
# decode, the seed's stress test, prefill, the cached turn's pass and issue 7 over HTTP on the
# final code (session 52's), on the card of the issues' targets; then the cached turn's time line.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
OUT=$OUT STEPS="decode stress prefill prefill152 chat_raw" timeout 430 bash server/bench/gpu_all.sh \
  > /dev/null 2>&1
timeout 100 python3 -m server.bench.http_stages --demo 2.9b --timeline > "$OUT/http_stages.log" 2>&1
echo "http_stages rc=$?"
grep -E "^===" "$OUT/summary.txt"
