#!/usr/bin/env bash
# Written in session 60 for the next GPU session (not run), after next_call.sh: issue 7's chat
# bench with the think time (2.9B, `--repeat 2`, two servers) with the allocator's expandable
# segments off / on / off / on, ~7 minutes. If they become the default (next_call.sh's speed
# A/B first), the cached turn must not get slower.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
for run in off1 on1 off2 on2; do
  conf=""; case $run in on*) conf=expandable_segments:True;; esac
  echo "=== $run" >> "$OUT/chat.log"
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 110 python3 -m server.bench.chat --demo 2.9b \
    --repeat 2 --client raw --think >> "$OUT/chat.log" 2>&1
  echo "$run rc=$?: $(sed -n "/=== $run/,\$p" "$OUT/chat.log" | \
    grep -E 'turns 2\+ of all|last turn' | tr '\n' ' ')"
done
