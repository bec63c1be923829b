#!/usr/bin/env bash
# Session 72, call 2: what a cap on a batched prefill pass's tokens (RWKV_PREFILL_TOKENS,
# 16,384 served) costs batched prefill, through the engine, fp16 state, 2.9B: served /
# 4,096 / 2,048, then served again (one model load each; the prompts' passes as served).
#   OUT=$OUT bash docs/experiments/session72/call2.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
for PT in 0 4096 2048 0; do
  timeout 100 python3 -m server.bench prefill --preset 2.9b --cases 64x512,16x1024,256x128,1x4096 \
    --scheduler 0 --repeat 3 --state-dtype fp16 --prefill-tokens $PT > "$OUT/prefill_pt$PT.log" 2>&1
  echo "prefill (prefill tokens $PT, 0 = served) rc=$? at $((SECONDS - T0)) s"
  grep -E "^\|" "$OUT/prefill_pt$PT.log" | cut -c1-200
  cp "$OUT/prefill_pt$PT.log" "$OUT/prefill_pt${PT}_$SECONDS.log"
done
