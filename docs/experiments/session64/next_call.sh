#!/usr/bin/env bash
# Written in session 64 for the next GPU session (not run). About 9-10 minutes; any card, the
# chat on an H200 only. At most 8 files come back.
# 0. The GPU tests at HEAD: 74bff84 (the review's fixes: GraphedDecode's eviction and pruning of
#    the logits buffers under CAPTURE_LOCK, a failed capture's buffer dropped) ran on the CPU only.
# 1. Decode at batch 1 / 256 / 1,024 with and without the cuBLAS workspaces run.py now sets
#    (batch 1,024 was not timed with them in session 64), alternating.
# 2. The served memory after the start and a load on this card (`server.bench memory`, which sets
#    the CUDA defaults as run.py does), and with RWKV_COPYBACK_MB's 256 (`--copyback-mb 256`).
# 3. The seed's stress test, copy-back 1,024 / 256 MiB twice (session 64: 86 vs 81 % of peak, one
#    run each).
# 4. On an H200: issue 7's chat (not measured on an H200 since session 61).
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_model_gpu.py \
  test/test_engine_no_wait_gpu.py test/test_prefix_cache_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
small() { CUBLAS_WORKSPACE_CONFIG=:4096:2 CUBLASLT_WORKSPACE_SIZE=4096 "$@"; }
plain() { "$@"; }
for round in 1 2; do
  for ws in plain small; do
    echo "=== $ws $round" >> "$OUT/decode.log"
    $ws timeout 70 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 \
      --state-dtype fp16 --pulses 3 >> "$OUT/decode.log" 2>&1
    echo "decode $ws $round rc=$? at $((SECONDS - T0)) s:"
    sed -n "/=== $ws $round/,\$p" "$OUT/decode.log" | grep -E "^\| [0-9]"
  done
done
for mb in 0 256; do
  echo "=== copyback $mb" >> "$OUT/memory.log"
  timeout 120 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
    --load 256 --copyback-mb $mb >> "$OUT/memory.log" 2>&1
  echo "memory $mb rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== copyback $mb/,\$p" "$OUT/memory.log" \
    | grep -E '^device in use|after a load' | tr '\n' ' ' | cut -c1-600)"
done
for mb in 1024 256 1024 256; do
  echo "=== copyback $mb" >> "$OUT/stress.log"
  timeout 100 python3 -m server.bench stress --preset 2.9b --tasks 256 --max-tokens 2000 \
    --buffer-size 32 --temperature 1.0 --deadline 80 --state-dtype fp16 --copyback-mb $mb \
    >> "$OUT/stress.log" 2>&1
  echo "stress $mb rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== copyback $mb/,\$p" \
    "$OUT/stress.log" | grep -E 'whole-run|copy-back|peak memory' | tail -3 | tr '\n' ' ')"
done
if grep -q H200 "$OUT/gpu.txt"; then
  timeout 110 python3 -m server.bench.chat --demo 2.9b --repeat 2 --client raw --think \
    > "$OUT/chat.log" 2>&1
  echo "chat rc=$?: $(grep -E 'turns 2\+ of all|last turn' "$OUT/chat.log" | head -2 | tr '\n' ' ')"
fi
