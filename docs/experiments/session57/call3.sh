#!/usr/bin/env bash
# Session 57, GPU call 3: only on an H200 (exits 3 at once on another card): issue 7's chat bench
# and decode at batch 1 / 256 / 1,024 (fp16 state) on the final code, on the issues' card.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
OUT=$OUT STEPS="chat_raw" timeout 130 bash server/bench/gpu_all.sh > /dev/null 2>&1
timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
  --pulses 3 > "$OUT/decode.log" 2>&1
echo "decode rc=$?"
grep -E "turns 2\+ of all|last turn" "$OUT/chat_raw.log"
grep -E "^\|" "$OUT/decode.log"
