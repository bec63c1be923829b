#!/usr/bin/env bash
# Session 57, GPU call 1 (exits 3 at once on a card other than an H200): the final code's
# checks: every CUDA test of gpu_all.sh's list, decode at batch 1 / 256 / 1,024 (fp16 state) and
# issue 7's chat bench over HTTP at 2.9B.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
OUT=$OUT STEPS="tests" timeout 400 bash server/bench/gpu_all.sh > /dev/null 2>&1
timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
  --pulses 3 > "$OUT/decode.log" 2>&1
echo "decode rc=$?"
OUT=$OUT STEPS="chat_raw" timeout 100 bash server/bench/gpu_all.sh > /dev/null 2>&1
grep -E "^===|passed|failed" "$OUT/summary.txt" | tail -8
grep -E "^\|" "$OUT/decode.log"
grep -E "turns 2\+ of all|last turn" "$OUT/chat_raw.log"
