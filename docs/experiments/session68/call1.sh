#!/usr/bin/env bash
# Session 68, call 1: the one-kernel WKV token loop of batched prefill passes
# (decode_triton.time_mix_seq) on CUDA (call 2 ran it again on its second form): its tests and the decode kernel's (refactored to share
# its pre_wkv / post_wkv helpers), then batched prefill through the engine with it on / off,
# alternating, twice.   OUT=$OUT bash docs/experiments/session68/call1.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -o addopts= -m gpu -q -s -p no:cacheprovider \
  test/test_wkv_seq_kernel.py test/test_fused_kernels.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
grep -E "rel err|seq kernel ok" "$OUT/tests.log" | head -20
for round in 1 2; do
  for on in 1 0; do
    echo "=== one kernel $on, round $round" >> "$OUT/prefill.log"
    timeout 90 python3 -m server.bench prefill --preset 2.9b --cases 64x512,16x1024,256x32,8x512 \
      --scheduler 0 --repeat 3 --state-dtype fp16 --seq-one-kernel $on >> "$OUT/prefill.log" 2>&1
    echo "prefill on=$on rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== one kernel $on, round $round/,\$p" \
      "$OUT/prefill.log" | grep -E '^\| [0-9]' | awk -F'|' '{print $2 $4 $9}' | tr '\n' ';')"
  done
done
