#!/usr/bin/env bash
# Session 56, GPU call 3: server.bench.l2_prefetch (new): does reading the output product's and
# the FFN key's weights into L2 on a side stream, while a 160-token pass's chunked WKV runs,
# shorten those products? 2.9B shape, 32 distinct weight sets, CUDA graphs. Run twice: the
# second run (gpu_call4) with the products timed right after a touch, and 64-264 programs.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 240 python3 -m server.bench.l2_prefetch > "$OUT/l2_prefetch.log" 2>&1
echo "rc=$?"; cat "$OUT/l2_prefetch.log" | tail -40
