#!/usr/bin/env bash
# Session 64, second GPU call (about 8-9 minutes, any card; A/Bs on one machine).
# 1. cuBLAS's workspaces: the served memory table (session 62) holds four 32 MiB blocks first
#    allocated by products on four streams (fused.py's _f32_products, _lora, 2 x
#    _rkv_lora_overlapped): cuBLAS's per-(handle, stream) workspace, 32 MiB on Hopper. With
#    CUBLAS_WORKSPACE_CONFIG=:4096:2 and CUBLASLT_WORKSPACE_SIZE=4096 (KiB; 8 / 4 MiB): memory
#    after the start, then decode at batch 1 / 256 and prefill 1 x 152 / 1 x 4,096 / 64 x 512,
#    default and small alternating.
# 2. The seed's stress test with copy-back budgets of 1,024 and 256 MiB at bc38030 (passes gather
#    at most 256 MiB of scattered rows; what a smaller copy-back budget
#    costs: the scheduler waits for the copy-back when many rows finish at once).
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
small() { CUBLAS_WORKSPACE_CONFIG=:4096:2 CUBLASLT_WORKSPACE_SIZE=4096 "$@"; }
plain() { "$@"; }
for ws in plain small; do
  echo "=== $ws" >> "$OUT/memory.log"
  $ws timeout 100 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
    >> "$OUT/memory.log" 2>&1
  echo "memory $ws rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $ws/,\$p" "$OUT/memory.log" | \
    grep -E '^live blocks|^device in use|_f32_products|_lora' | tr '\n' ' ' | cut -c1-700)"
done
for round in 1 2; do
  for ws in plain small; do
    echo "=== $ws $round" >> "$OUT/speed.log"
    $ws timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256 --state-dtype fp16 \
      --pulses 3 >> "$OUT/speed.log" 2>&1
    $ws timeout 80 python3 -m server.bench prefill --preset 2.9b --cases 1x152,1x4096,64x512 \
      --scheduler 0 --repeat 3 --state-dtype fp16 >> "$OUT/speed.log" 2>&1
    echo "speed $ws $round rc=$? at $((SECONDS - T0)) s:"
    sed -n "/=== $ws $round/,\$p" "$OUT/speed.log" | grep -E "^\| [0-9]"
  done
done
for mb in 1024 256; do
  echo "=== copyback $mb" >> "$OUT/stress.log"
  timeout 100 python3 -m server.bench stress --preset 2.9b --tasks 256 --max-tokens 2000 \
    --buffer-size 32 --temperature 1.0 --deadline 80 --state-dtype fp16 --copyback-mb $mb \
    >> "$OUT/stress.log" 2>&1
  echo "stress copyback $mb rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== copyback $mb/,\$p" \
    "$OUT/stress.log" | grep -E 'whole-run|peak:|copy-back|peak memory' | tail -4 | tr '\n' ' ')"
done
