#!/usr/bin/env bash
# Session 65, second GPU call (about 5-6 minutes, any card; the chat on an H200 only).
# 1. Decode at batch 1 / 256 / 1,024 with and without the cuBLAS workspaces run.py sets since
#    session 64 (batch 1,024 was not timed with them), alternating, two rounds.
# 2. On an H200: issue 7's chat (not measured on an H200 since session 61).
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
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
if grep -q H200 "$OUT/gpu.txt"; then
  timeout 110 python3 -m server.bench.chat --demo 2.9b --repeat 2 --client raw --think \
    > "$OUT/chat.log" 2>&1
  echo "chat rc=$?: $(grep -E 'turns 2\+ of all|last turn' "$OUT/chat.log" | head -2 | tr '\n' ' ')"
fi
