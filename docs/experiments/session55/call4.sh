#!/usr/bin/env bash
# Session 55, GPU call 4: only on an H200 (exits 3 at once on another card): issue 7 over HTTP
# and decode at 2.9B on this session's code, on the card of the issues' targets.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
OUT=$OUT STEPS="decode chat_raw" timeout 300 bash server/bench/gpu_all.sh > /dev/null 2>&1
grep -E "^===|^\| (1|256|1024) \|.*fp16|turns 2\+ of|last turn" "$OUT/summary.txt" "$OUT/chat_raw.log"
