#!/usr/bin/env bash
# Session 71, call 3: the idle daemon gives PyTorch's cached device blocks back (idle_trim.py,
# memory.give_back_cached). Its GPU test, the served memory after a load and after the idle
# give-back, then what the give-back costs the next work (trim_cost.py) with the time left
# (240 s in all: the session's device time; call2.sh's tests did not fit).
#   OUT=$OUT bash docs/experiments/session71/call3.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
timeout 60 python3 -m pytest -o addopts= -m gpu -p no:cacheprovider -rA \
  test/test_engine_no_wait_gpu.py > "$OUT/tests_trim.log" 2>&1
echo "trim tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests_trim.log")"
timeout 110 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
  --load 256 > "$OUT/memory.log" 2>&1
echo "memory rc=$? at $((SECONDS - T0)) s"
grep -E '^device in use|after a load|once idle|no idle give-back' "$OUT/memory.log" | cut -c1-300
LEFT=$((240 - (SECONDS - T0)))
timeout $LEFT python3 docs/experiments/session71/trim_cost.py > "$OUT/trim_cost.log" 2>&1
echo "trim_cost rc=$? at $((SECONDS - T0)) s"; grep -E "^\||given back" "$OUT/trim_cost.log" | cut -c1-200
