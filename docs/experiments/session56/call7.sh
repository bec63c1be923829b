#!/usr/bin/env bash
# Session 56, GPU call 7: does pinning the event loop thread and the scheduler thread to one
# core each (two different cores) shorten a cached chat turn on a GPU host? An uncommitted
# experiment (server/api/app.py's lifespan and BaseScheduler._loop pin themselves when
# RWKV_PIN_EXPERIMENT is set; the diff: pin_experiment.diff); issue 7's chat bench at 2.9B,
# off / on alternating, twice, on one machine.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node0" | tee -a "$OUT/gpu.txt"
for pin in "" 1 "" 1; do
  echo "=== pin '${pin}' ($(date -u +%T))" | tee -a "$OUT/ab.log"
  RWKV_PIN_EXPERIMENT=$pin timeout 130 python3 -m server.bench.chat --demo 2.9b --repeat 3 \
    --client raw >> "$OUT/ab.log" 2>&1
  echo "rc=$?" >> "$OUT/ab.log"
done
grep -E "^===|rc=|turns 2\+ of all|last turn" "$OUT/ab.log"
grep -h "EXPERIMENT" /tmp/rwkv-bench-chat-*/*.log 2>/dev/null | head -4
