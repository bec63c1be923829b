#!/usr/bin/env bash
# Session 70, call 4: small weights packed into one buffer (small_pack.py) on top of the packed
# LoRA stacks; where the 1 x 158 pass's ~1 % goes (lora_chain.py).
#   OUT=$OUT bash docs/experiments/session70/call4.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 90 python3 -m pytest -o addopts= -m gpu -p no:cacheprovider -rA test/test_fused_kernels.py \
  test/test_model_gpu.py -k "matches_reference or decode_paths or side_stream or graph or dropped" \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -5
timeout 90 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
  --load 256 > "$OUT/memory.log" 2>&1
echo "memory rc=$? at $((SECONDS - T0)) s"
grep -E "^device in use|after a load|small-block" "$OUT/memory.log" | cut -c1-300
timeout 60 python3 docs/experiments/session70/lora_chain.py > "$OUT/lora_chain.log" 2>&1
echo "chain rc=$? at $((SECONDS - T0)) s"; grep -E "^\|" "$OUT/lora_chain.log"
timeout 40 python3 -m server.bench decode --preset 2.9b --batch 1,256 --state-dtype fp16 \
  --pulses 3 > "$OUT/decode.log" 2>&1
echo "decode rc=$? at $((SECONDS - T0)) s"; grep -E "^\| [0-9]" "$OUT/decode.log"
