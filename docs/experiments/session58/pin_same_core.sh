#!/usr/bin/env bash
# Session 58 (written, NOT run: no device time was left): the event loop thread and the
# scheduler thread pinned to ONE core (the same one; session 56's pin_experiment.diff pinned
# them to two cores, no effect shown). Both hold the GIL in turn, so one core costs them
# little parallelism, while data both touch stays in that core's caches and the scheduler's
# wake-up needs no other (idle) core.
# An uncommitted experiment: same_core.diff, applied to a `git archive` of HEAD in .whl/pin_exp
# (RWKV_PIN_EXPERIMENT=k pins both to the k-th core of the process's affinity). Issue 7's chat
# bench at 2.9B (two servers, raw client, --repeat 2): off / on / off / on.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node0" | tee -a "$OUT/gpu.txt"
cd .whl/pin_exp  # (make it: see same_core.diff's header in performance.md, session 58)
for pin in "" 2 "" 2; do
  echo "=== pin '${pin}' ($(date -u +%T))" | tee -a "$OUT/ab.log"
  RWKV_PIN_EXPERIMENT=$pin PYTHONPATH=/tmp/site:. timeout 120 python3 -m server.bench.chat \
    --demo 2.9b --repeat 2 --client raw >> "$OUT/ab.log" 2>&1
  echo "rc=$?" >> "$OUT/ab.log"
done
grep -E "^===|rc=|turns 2\+ of all|last turn" "$OUT/ab.log"
grep -h "EXPERIMENT" /tmp/rwkv-bench-chat-*/*.log 2>/dev/null | head -4
