#!/usr/bin/env bash
# Session 72, call 1: session 71's call 3 (the idle give-back's GPU test, the served memory
# after a load and once idle, what the give-back costs the next work), plus the served memory
# with a batched prefill pass capped at 2,048 tokens (RWKV_PREFILL_TOKENS; 16,384 served):
# does the load's peak, a batched prefill pass, then stay within 10 GB all told?
#   OUT=$OUT bash docs/experiments/session72/call1.sh   (TOTAL=300: trim_cost.py gets what is left)
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
timeout 60 python3 -m pytest -o addopts= -m gpu -p no:cacheprovider -rA \
  test/test_engine_no_wait_gpu.py > "$OUT/tests_trim.log" 2>&1
echo "trim tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests_trim.log")"
for PT in 0 2048; do
  timeout 115 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
    --load 256 --prefill-tokens $PT > "$OUT/memory_pt$PT.log" 2>&1
  echo "memory (prefill tokens $PT, 0 = served default) rc=$? at $((SECONDS - T0)) s"
  grep -E '^device in use|after a load|once idle|no idle give-back' "$OUT/memory_pt$PT.log" | cut -c1-400
done
LEFT=$((${TOTAL:-470} - (SECONDS - T0)))  # (TOTAL: seconds for the whole call)
timeout $LEFT python3 docs/experiments/session71/trim_cost.py > "$OUT/trim_cost.log" 2>&1
echo "trim_cost rc=$? at $((SECONDS - T0)) s"; grep -E "^\||given back" "$OUT/trim_cost.log" | cut -c1-200
