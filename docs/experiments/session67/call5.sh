#!/usr/bin/env bash
# Session 67, GPU call 5 (any card): issue 7's chat over HTTP on the final code
# (`server.bench.chat --demo 2.9b --repeat 2 --client raw --think`, two servers); on an H200
# also decode at batch 1 / 256 / 1,024 (the targets' card; not measured there since session 61).
#   OUT=$OUT bash docs/experiments/session67/call5.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
md5sum server/scheduler/*.py server/model/*.py server/task/*.py server/api/*.py > "$OUT/md5.txt"
timeout 200 python3 -m server.bench.chat --demo 2.9b --repeat 2 --client raw --think \
  > "$OUT/chat.log" 2>&1
echo "chat rc=$? at $((SECONDS - T0)) s: $(grep -E 'turns 2\+ of all|last turn' "$OUT/chat.log" \
  | head -3 | tr '\n' ' ')"
if grep -q H200 "$OUT/gpu.txt"; then
  timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
    --pulses 3 > "$OUT/decode.log" 2>&1
  echo "decode rc=$? at $((SECONDS - T0)) s: $(grep -E '^\| [0-9]' "$OUT/decode.log" \
    | cut -d'|' -f2-4 | tr '\n' ' ')"
fi
