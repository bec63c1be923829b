#!/usr/bin/env bash
# Session 69, call 1: session 68's unrun checks (its call4.sh) and pass grouping (plan_passes).
# - CUDA tests: the one-kernel token loop (test_wkv_seq_kernel.py, chunks of 32 included), the
#   model's GPU tests and split invariance (batched prefill of mixed lengths now grouped);
# - load_prefill.py: the served load's prefill calls, grouped as before / by plan_passes;
# - served memory after a load of 256 requests, HEAD against .whl/ab_base (git-ignored; made by
#     mkdir -p .whl/ab_base && git archive 063d0a0 server run.py eof_v20230424.txt \
#       few_shot.txt | tar -x -C .whl/ab_base   (session 68's final code, before plan_passes));
# - decode at batch 1 / 256 / 1,024 once.
#   OUT=$OUT bash docs/experiments/session69/call1.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
BASE=.whl/ab_base
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 170 python3 -m pytest -o addopts= -m gpu -q -s -p no:cacheprovider \
  test/test_wkv_seq_kernel.py test/test_model_gpu.py test/test_split_invariance_gpu.py \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
timeout 90 python3 docs/experiments/session69/load_prefill.py --rounds 2 > "$OUT/load_prefill.log" 2>&1
echo "load_prefill rc=$? at $((SECONDS - T0)) s"; grep -E "^round|calls" "$OUT/load_prefill.log"
for v in "new ." "base $BASE"; do
  set -- $v
  echo "=== $1" >> "$OUT/memory.log"
  (cd "$2" && timeout 110 python3 -m server.bench memory --demo 2.9b --max-batch 256 \
    --state-dtype fp16 --load 256) >> "$OUT/memory.log" 2>&1
  echo "memory $1 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1/,\$p" "$OUT/memory.log" \
    | grep -E '^device in use|after a load' | tr '\n' ' ' | cut -c1-600)"
done
echo "=== new" >> "$OUT/decode.log"
timeout 50 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
  --pulses 3 >> "$OUT/decode.log" 2>&1
echo "decode rc=$? at $((SECONDS - T0)) s: $(grep -E '^\| [0-9]' "$OUT/decode.log" \
  | tail -3 | awk -F'|' '{print $2 $3}' | tr '\n' ' ')"
