#!/usr/bin/env bash
# Session 71, call 3: the idle daemon gives PyTorch's cached device blocks back (idle_trim.py,
# memory.give_back_cached). Its GPU test, the served memory after a load and after the idle
# give-back, then what the give-back costs the next work (trim_cost.py) with the time left.
# Never ran (no machine came in sessions 71-72); session72/call1.sh runs it with CAPS="0 2048".
#   OUT=$OUT bash docs/experiments/session71/call3.sh
#   CAPS: RWKV_PREFILL_TOKENS values, a memory run each (0 = served; memory_pt$CAP.log);
#   TOTAL: seconds for the whole call (330), trim_cost.py gets what is left
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
timeout 60 python3 -m pytest -o addopts= -m gpu -p no:cacheprovider -rA \
  test/test_engine_no_wait_gpu.py > "$OUT/tests_trim.log" 2>&1
echo "trim tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests_trim.log")"
for PT in ${CAPS:-0}; do
  timeout 115 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
    --load 256 --prefill-tokens $PT > "$OUT/memory_pt$PT.log" 2>&1
  echo "memory (prefill tokens $PT, 0 = served default) rc=$? at $((SECONDS - T0)) s"
  grep -E '^device in use|after a load|once idle|no idle give-back' "$OUT/memory_pt$PT.log" \
    | cut -c1-400
done
LEFT=$((${TOTAL:-330} - (SECONDS - T0)))
if [ "$LEFT" -gt 10 ]; then  # (timeout 0 would not limit it at all)
  timeout $LEFT python3 docs/experiments/session71/trim_cost.py > "$OUT/trim_cost.log" 2>&1
  echo "trim_cost rc=$? at $((SECONDS - T0)) s"
  grep -E "^\||given back" "$OUT/trim_cost.log" | cut -c1-200
else
  echo "trim_cost: no time left (${LEFT} s)"
fi
