#!/usr/bin/env bash
# Session 61 call 3c (the device time left: ~6 minutes with the start): the chat A/B in the
# order opposite to call 2 (on, then off): call 2 gave cached medians 8.9 off vs 9.9 ms on, one
# run each, off first).
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
for run in on1 off1; do
  conf=""; case $run in on*) conf=expandable_segments:True;; esac
  echo "=== $run" >> "$OUT/chat.log"
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 100 python3 -m server.bench.chat --demo 2.9b \
    --repeat 2 --client raw --think >> "$OUT/chat.log" 2>&1
  echo "$run rc=$?: $(sed -n "/=== $run/,\$p" "$OUT/chat.log" | \
    grep -E 'turns 2\+ of all|last turn' | head -2 | tr '\n' ' ' | cut -c1-400)"
done
