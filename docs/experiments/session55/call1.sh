#!/usr/bin/env bash
# Session 55, GPU call 1: every CUDA test of gpu_all.sh on this session's fixes (the pulse's
# new-turn rows, the prefix cache's logits on the host tier, the task store); then decode at
# 2.9B (batch 1, 256, 1,024, fp16 state: the pulse's new per-row host check) and issue 7 over
# HTTP, on whichever card comes (the card is recorded in gpu.txt).
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
OUT=$OUT STEPS="tests" timeout 400 bash server/bench/gpu_all.sh > /dev/null 2>&1
timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
  --pulses 3 > "$OUT/decode.log" 2>&1
echo "decode rc=$?"
OUT=$OUT STEPS="chat_raw" timeout 100 bash server/bench/gpu_all.sh > /dev/null 2>&1
grep -E "^===|passed|failed" "$OUT/summary.txt" | tail -8
grep -E "^\|" "$OUT/decode.log"
