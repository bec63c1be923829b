#!/usr/bin/env bash
# Session 68, call 4 (not run in session 68: no device time left; the next GPU session's first
# call). At the one-kernel token loop's served options (chunks of 16, four items an SM at least):
# - its CUDA tests (the many-items one also at chunks of 32: if that passes, 32 can become the
#   default, 1-3 % faster in call 3);
# - the served process's memory after a load of 256 requests (one batched prefill pass of them
#   is the peak: session 67), with it and before it (.whl/ab_base, git-ignored: make it first
#   with  mkdir -p .whl/ab_base && git archive 6f719bd server run.py eof_v20230424.txt
#   few_shot.txt | tar -x -C .whl/ab_base  (session 67's final code));
# - decode at batch 1 / 256 / 1,024 once (the decode kernel now shares pre_wkv's helpers).
#   OUT=$OUT bash docs/experiments/session68/call4.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
BASE=.whl/ab_base
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 120 python3 -m pytest -o addopts= -m gpu -q -s -p no:cacheprovider \
  test/test_wkv_seq_kernel.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
grep -E "rel err|seq kernel ok" "$OUT/tests.log" | head -8
for v in "new ." "base $BASE"; do
  set -- $v
  echo "=== $1" >> "$OUT/memory.log"
  (cd "$2" && timeout 110 python3 -m server.bench memory --demo 2.9b --max-batch 256 \
    --state-dtype fp16 --load 256) >> "$OUT/memory.log" 2>&1
  echo "memory $1 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1/,\$p" "$OUT/memory.log" \
    | grep -E '^device in use|after a load' | tr '\n' ' ' | cut -c1-600)"
done
for v in "new ."; do  # (the device time left: one decode run, the new code)
  set -- $v
  echo "=== $1" >> "$OUT/decode.log"
  (cd "$2" && timeout 50 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 \
    --state-dtype fp16 --pulses 3) >> "$OUT/decode.log" 2>&1
  echo "decode $1 rc=$? at $((SECONDS - T0)) s: $(grep -E '^\| [0-9]' "$OUT/decode.log" \
    | tail -3 | awk -F'|' '{print $2 $3}' | tr '\n' ' ')"
done
