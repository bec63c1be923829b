#!/usr/bin/env bash
# Session 70, call 5: call4.sh trimmed to the device time left (~280 s with a start): the
# CUDA tests of the small-weights pack, the served memory, the LoRA chain's timing.
#   OUT=$OUT bash docs/experiments/session70/call5.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 70 python3 -m pytest -o addopts= -m gpu -p no:cacheprovider -rA test/test_fused_kernels.py \
  test/test_model_gpu.py -k "matches_reference or side_stream or dropped" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
grep -E "^(PASSED|FAILED|ERROR)" "$OUT/tests.log" | cut -c1-120
timeout 70 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
  --load 256 > "$OUT/memory.log" 2>&1
echo "memory rc=$? at $((SECONDS - T0)) s"
grep -E "^device in use|after a load|small-block" "$OUT/memory.log" | cut -c1-300
timeout 40 python3 docs/experiments/session70/lora_chain.py --reps 100 > "$OUT/lora_chain.log" 2>&1
echo "chain rc=$? at $((SECONDS - T0)) s"; grep -E "^\|" "$OUT/lora_chain.log"
