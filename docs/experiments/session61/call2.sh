#!/usr/bin/env bash
# Session 61, after next_call.sh (session 60's): the served memory at HEAD (3b562de: expandable
# segments by default, the warm-up's cached blocks returned), then issue 7's chat bench with the
# think time, the allocator's expandable segments off / on (run.py's default now). ~7 minutes.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
timeout 240 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
  --load 256 > "$OUT/memory.log" 2>&1
echo "memory rc=$?"; grep -E "after the warm-up|device in use|after the load|peak" "$OUT/memory.log" | cut -c1-400
for run in off1 on1; do
  conf=""; case $run in on*) conf=expandable_segments:True;; esac
  echo "=== $run" >> "$OUT/chat.log"
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 110 python3 -m server.bench.chat --demo 2.9b \
    --repeat 2 --client raw --think >> "$OUT/chat.log" 2>&1
  echo "$run rc=$?: $(sed -n "/=== $run/,\$p" "$OUT/chat.log" | \
    grep -E 'turns 2\+ of all|last turn' | tr '\n' ' ')"
done
