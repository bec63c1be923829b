#!/usr/bin/env bash
# Session 70's open checks (next session's first call): the small weights in one buffer
# (small_pack.py, 239517a) on top of the packed LoRA stacks (f9be4a8).
# - CUDA tests: the fused path and the model against the fp32 reference, graphs, a dropped
#   model's memory (with the pack and its empty_cache);
# - served memory after the start and after a load of 256 requests, new / base / new (base =
#   .whl/ab_base, the LoRA packing without the small weights' buffer), made by
#     rm -rf .whl/ab_base && mkdir -p .whl/ab_base && git archive 90d1b76 server run.py \
#       eof_v20230424.txt few_shot.txt | tar -x -C .whl/ab_base
# - the LoRA chain's timing (lora_chain.py), then decode at batch 1 / 256.
#   OUT=$OUT bash docs/experiments/session70/call4.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
BASE=.whl/ab_base
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 150 python3 -m pytest -o addopts= -m gpu -p no:cacheprovider -rA test/test_fused_kernels.py \
  test/test_model_gpu.py -k "matches_reference or decode_paths or side_stream or graph or dropped" \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -5
for v in "new ." "base $BASE" "new ."; do
  set -- $v
  echo "=== $1" >> "$OUT/memory.log"
  (cd "$2" && timeout 100 python3 -m server.bench memory --demo 2.9b --max-batch 256 \
    --state-dtype fp16 --load 256) >> "$OUT/memory.log" 2>&1
  echo "memory $1 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1/,\$p" "$OUT/memory.log" \
    | grep -E '^device in use|after a load|small-block segments,' | tail -5 | cut -c1-240)"
done
timeout 60 python3 docs/experiments/session70/lora_chain.py > "$OUT/lora_chain.log" 2>&1
echo "chain rc=$? at $((SECONDS - T0)) s"; grep -E "^\|" "$OUT/lora_chain.log"
timeout 40 python3 -m server.bench decode --preset 2.9b --batch 1,256 --state-dtype fp16 \
  --pulses 3 > "$OUT/decode.log" 2>&1
echo "decode rc=$? at $((SECONDS - T0)) s"; grep -E "^\| [0-9]" "$OUT/decode.log"
