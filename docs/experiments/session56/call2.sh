#!/usr/bin/env bash
# Session 56, GPU call 2: where the cached chat turn's first token waits after its pass, at 2.9B
# on 309228f + http_stages --kernels (removed after this call: its trace held no prefill kernel,
# and starting the profiler made turn 10 take 102 ms): the device's work from the pass's last
# WKV kernel to the first token's read (torch.profiler, kernel_tail.py), then the scheduler's
# host/device time line of the same turn (--timeline: CUDA events, a separate run).
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
[ -z "${H200_ONLY:-}" ] || grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
timeout 200 python3 -m server.bench.http_stages --demo 2.9b --kernels > "$OUT/kernels.log" 2>&1
echo "kernels rc=$?"
timeout 150 python3 -m server.bench.http_stages --demo 2.9b --timeline > "$OUT/timeline.log" 2>&1
echo "timeline rc=$?"
grep -A60 "the last turn, cached" "$OUT/kernels.log" | head -70
