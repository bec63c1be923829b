#!/usr/bin/env bash
# Session 62 call 1: session 61's next_call.sh as written.
# Written in session 61 for the next GPU session (not run). About 7 minutes; any card (A/Bs on
# one machine). At most 8 files come back: logs are grouped.
# 1. Issue 7's chat bench (think time) with the allocator's expandable segments on / off / off /
#    on: session 61 call 2 gave cached medians 8.9 (off, run first) vs 9.9 ms (on, second), one
#    run each, with the uncached turns slower in the second run too. Make them run.py's default
#    (3b562de, reverted in 24a5a0f: `git revert 24a5a0f` brings it back) only if the cached turns
#    show no cost.
# 2. The served memory after the start with the default allocator and the graphs' pools' share
#    of the reservation split out (faef0c1): what the ~0.47 GiB between reserved and allocated is.
# 3. The embedding's GPU test after 4a349a8 (the gather's bounds mask; not run on a GPU).
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
for run in on1 off1 off2 on2; do
  conf=""; case $run in on*) conf=expandable_segments:True;; esac
  echo "=== $run" >> "$OUT/chat.log"
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 100 python3 -m server.bench.chat --demo 2.9b \
    --repeat 2 --client raw --think >> "$OUT/chat.log" 2>&1
  echo "$run rc=$?: $(sed -n "/=== $run/,\$p" "$OUT/chat.log" | \
    grep -E 'turns 2\+ of all|last turn' | head -2 | tr '\n' ' ' | cut -c1-400)"
done
for conf in "" expandable_segments:True; do
  echo "=== PYTORCH_CUDA_ALLOC_CONF=$conf" >> "$OUT/memory.log"
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 90 python3 -m server.bench memory --demo 2.9b \
    --max-batch 256 --state-dtype fp16 >> "$OUT/memory.log" 2>&1
  echo "memory [$conf] rc=$?"
done
grep -E "live blocks|device in use" "$OUT/memory.log" | cut -c1-300
timeout 120 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_embedding.py \
  test/test_model_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(tail -1 "$OUT/tests.log")"
