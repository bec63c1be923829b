#!/usr/bin/env bash
# Session 69, call 2: the engine gathering a prefill's rows longest first (each pass then views
# of them), chunks of 32 in the one-kernel token loop (served now).
# - CUDA tests: test_wkv_seq_kernel.py at the served options; the model against the fp32
#   reference (mixed-length batched prefills: now passes by width) and graphed prefill;
# - (VARIANTS=1) seq_variants.py: three launches / chunks of 16 / chunks of 32, two rounds;
# - served memory after a load of 256 requests, HEAD against .whl/ab_base (git-ignored; made by
#     mkdir -p .whl/ab_base && git archive 063d0a0 server run.py eof_v20230424.txt \
#       few_shot.txt | tar -x -C .whl/ab_base   (session 68's final code)).
# - last, load_prefill.py: the served load's prefill calls, before / now.
#   OUT=$OUT bash docs/experiments/session69/call2.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
BASE=.whl/ab_base
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 150 python3 -m pytest -o addopts= -m gpu -q -s -p no:cacheprovider -rfE \
  test/test_wkv_seq_kernel.py test/test_model_gpu.py -k "seq or one_kernel or matches_reference \
  or prefill_equals" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -5
if [ "${VARIANTS:-0}" = 1 ]; then  # (left out of the run made: device time was short)
  timeout 70 python3 docs/experiments/session68/seq_variants.py --rounds 2 \
    --cases 64x512,16x1024,256x32 --variants "off;4,16,4;4,32,4" > "$OUT/variants.log" 2>&1
  echo "variants rc=$? at $((SECONDS - T0)) s"; grep -E "^round" "$OUT/variants.log" | cut -c1-200
fi
for v in "new ." "base $BASE"; do
  set -- $v
  echo "=== $1" >> "$OUT/memory.log"
  (cd "$2" && timeout 100 python3 -m server.bench memory --demo 2.9b --max-batch 256 \
    --state-dtype fp16 --load 256) >> "$OUT/memory.log" 2>&1
  echo "memory $1 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1/,\$p" "$OUT/memory.log" \
    | grep -E 'after a load' | cut -c1-400)"
done
timeout 60 python3 docs/experiments/session69/load_prefill.py --rounds 2 > "$OUT/load_prefill.log" 2>&1
echo "load_prefill rc=$? at $((SECONDS - T0)) s"; grep -E "^round" "$OUT/load_prefill.log"
