#!/usr/bin/env bash
# Session 52, GPU call 2 (the machine of call 1): the seed's stress test (last run: session 40),
# the prefill benchmark (session 34), 7.2B decode at 256, issue 7 over HTTP, and the cached
# turn's time line.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
OUT=$OUT STEPS="stress prefill decode72 chat_raw" timeout 470 bash server/bench/gpu_all.sh \
  > /dev/null 2>&1
timeout 110 python3 -m server.bench.http_stages --demo 2.9b --timeline > "$OUT/http_stages.log" 2>&1
echo "http_stages rc=$?"
grep -E "^===" "$OUT/summary.txt"
