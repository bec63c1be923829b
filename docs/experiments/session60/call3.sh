#!/usr/bin/env bash
# Session 60, call 3: what serving adds to the start's memory (call 2: a load of 256 requests
# took a 2.9B server from 9.74 to 12.65 GiB on the device: a 1.4 GiB peak of a batched
# prefill pass's working set, then 2 GiB reserved above that peak), against two levers:
# 1. `server.bench memory --load 256` with the allocator's expandable segments, then also with a
#    prefill pass capped at 4,096 tokens (rows x padded width; 16,384 as served);
# 2. the cap's cost: `prefill --cases 64x512,16x1024,1x4096 --scheduler 0` at 16,384 / 4,096
#    tokens a pass;
# 3. the CUDA tests of the graphs and the prefix cache with expandable segments on.
# At most 8 files come back: each kind's logs go into one file.
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
EXP=expandable_segments:True
for run in "expandable $EXP 0" "both $EXP 4096"; do
  set -- $run
  conf=$2; [ "$conf" = - ] && conf=""
  echo "=== $1" >> "$OUT/memory.log"
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 150 python3 -m server.bench memory --demo 2.9b \
    --max-batch 256 --state-dtype fp16 --load 256 --prefill-tokens $3 >> "$OUT/memory.log" 2>&1
  echo "memory $1 rc=$?: $(sed -n "/=== $1/,\$p" "$OUT/memory.log" | grep -E \
    'after the warm-up:|^device in use|after a load|at that peak' | tr '\n' ' ')"
done
for tokens in 16384 4096; do
  echo "=== $tokens" >> "$OUT/prefill.log"
  timeout 80 python3 -m server.bench prefill --preset 2.9b --cases 64x512,16x1024,1x4096 \
    --scheduler 0 --repeat 3 --state-dtype fp16 --prefill-tokens $tokens >> "$OUT/prefill.log" 2>&1
  echo "prefill $tokens tokens a pass rc=$?"
  sed -n "/=== $tokens/,\$p" "$OUT/prefill.log" | grep -E "^\| [0-9]"
done
left=$((330 - (SECONDS - T0)))
[ $left -gt 30 ] && PYTORCH_CUDA_ALLOC_CONF=$EXP timeout $left python3 -m pytest -o addopts= \
  -m gpu -q -p no:cacheprovider test/test_embedding.py test/test_model_gpu.py test/test_prefix_cache_gpu.py \
  -k "not every_preset" \
  > "$OUT/tests.log" 2>&1
echo "tests (expandable segments) rc=$? (${left}s): $(tail -1 "$OUT/tests.log")"
