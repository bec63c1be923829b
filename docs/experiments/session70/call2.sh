#!/usr/bin/env bash
# Session 70, call 2: the LoRA stacks packed (fused.lora_stacks: groups overlapping, 3s + D
# rows instead of 4D; lora_act_ zeroing each group's columns past its width).
# - CUDA tests: the fused path against the plain one and the fp32 reference, the LoRA side
#   stream's bits, the model's GPU tests (reference, graphs, prefill);
# - decode at batch 1 / 256 / 1,024, new / base / new / base (weights' GB in the header);
# - engine prefill 1 x 4,096 and 64 x 512 (cuBLAS LoRA products on the overlapping stacks),
#   new / base;
# - served memory after the start and after a load of 256 requests, new / base.
# base = .whl/ab_base (git-ignored), made by
#     rm -rf .whl/ab_base && mkdir -p .whl/ab_base && git archive 6682f03 server run.py \
#       eof_v20230424.txt few_shot.txt | tar -x -C .whl/ab_base   (session 69's final code)
#   OUT=$OUT bash docs/experiments/session70/call2.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
BASE=.whl/ab_base
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 130 python3 -m pytest -o addopts= -m gpu -q -s -p no:cacheprovider -rfE \
  test/test_fused_kernels.py test/test_model_gpu.py -k "not split" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -5
for v in "new ." "base $BASE" "new ." "base $BASE"; do
  set -- $v
  echo "=== $1" >> "$OUT/decode.log"
  (cd "$2" && timeout 50 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 \
    --state-dtype fp16 --pulses 3) >> "$OUT/decode.log" 2>&1
  echo "decode $1 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1/,\$p" "$OUT/decode.log" \
    | grep -E '^\| [0-9]' | tail -3 | cut -d'|' -f2,3,8 | tr '\n' ' ')"
done
grep -E "^# decode" "$OUT/decode.log" | sort | uniq -c
for v in "new ." "base $BASE"; do
  set -- $v
  echo "=== $1" >> "$OUT/prefill.log"
  (cd "$2" && timeout 60 python3 -m server.bench prefill --preset 2.9b --cases 1x4096,64x512,1x158 \
    --scheduler 0 --repeat 5 --state-dtype fp16) >> "$OUT/prefill.log" 2>&1
  echo "prefill $1 rc=$? at $((SECONDS - T0)) s"
done
grep -E "^\| [0-9]+ ?x|^# prefill|^=== " "$OUT/prefill.log" | cut -c1-160
for v in "new ." "base $BASE"; do
  set -- $v
  echo "=== $1" >> "$OUT/memory.log"
  (cd "$2" && timeout 90 python3 -m server.bench memory --demo 2.9b --max-batch 256 \
    --state-dtype fp16 --load 256) >> "$OUT/memory.log" 2>&1
  echo "memory $1 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1/,\$p" "$OUT/memory.log" \
    | grep -E '^device in use|after a load' | cut -c1-300)"
done
