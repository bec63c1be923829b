#!/usr/bin/env bash
# Written in session 62 for the next GPU session (not run). About 10 minutes (drop a stress pair if short); any card (A/Bs on
# one machine). At most 8 files come back: logs are grouped.
# 1. The served memory under load with the copy-back's budget lowered (fbb8ff5's --copyback-mb):
#    session 62 call 2 found the copy-back's gathered states (1,241 MiB) the peak once passes are
#    capped at 4,096 tokens. As served; passes at 4,096 with budgets 1,024 / 512 / 256 MiB.
# 2. The seed's stress test with budgets 1,024 and 256 MiB: what a smaller budget costs (the
#    scheduler waits for the copy-back when many rows finish at once).
# 0. First: the GPU tests session 62's review named as not yet run after 194e2c3 (the pass's
#    del / clone): split invariance and the prefill graphs' exports.
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 150 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider \
  test/test_split_invariance_gpu.py test/test_mid_export.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(tail -1 "$OUT/tests.log")"
mem() {  # name, prefill tokens, copy-back MiB
  echo "=== $1" >> "$OUT/memory.log"
  timeout 150 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
    --load 256 --prefill-tokens $2 --copyback-mb $3 >> "$OUT/memory.log" 2>&1
  echo "memory $1 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1/,\$p" "$OUT/memory.log" | \
    grep -E 'after the warm-up:|^device in use|after a load' | tr '\n' ' ' | cut -c1-700)"
}
mem served 16384 0
mem p4096 4096 0
mem p4096c512 4096 512
mem p4096c256 4096 256
for mb in 1024 256 1024 256; do
  echo "=== copyback $mb" >> "$OUT/stress.log"
  timeout 100 python3 -m server.bench stress --preset 2.9b --tasks 256 --max-tokens 2000 \
    --buffer-size 32 --temperature 1.0 --deadline 80 --state-dtype fp16 --copyback-mb $mb \
    >> "$OUT/stress.log" 2>&1
  echo "stress copyback $mb rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== copyback $mb/,\$p" \
    "$OUT/stress.log" | grep -E 'whole-run|peak:|copy-back' | tail -3 | tr '\n' ' ')"
done
