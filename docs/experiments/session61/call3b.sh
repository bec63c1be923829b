#!/usr/bin/env bash
# Session 61 call 3 (cut to the device time left): issue 7's chat bench (think time) with
# expandable segments on / off / on / off (call 2 gave cached medians 8.9 off vs 9.9 ms on, one
# run each, off first), then the served memory at HEAD with the graphs' pools split out.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
for run in on1 off1 on2 off2; do
  conf=""; case $run in on*) conf=expandable_segments:True;; esac
  echo "=== $run" >> "$OUT/chat.log"
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 100 python3 -m server.bench.chat --demo 2.9b \
    --repeat 2 --client raw --think >> "$OUT/chat.log" 2>&1
  echo "$run rc=$?: $(sed -n "/=== $run/,\$p" "$OUT/chat.log" | \
    grep -E 'turns 2\+ of all|last turn' | head -2 | tr '\n' ' ' | cut -c1-400)"
done
timeout 80 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
  > "$OUT/memory.log" 2>&1
echo "memory rc=$?"; grep -E "live blocks|device in use" "$OUT/memory.log" | cut -c1-300
