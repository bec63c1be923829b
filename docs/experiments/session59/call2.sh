#!/usr/bin/env bash
# Session 59, call 2: the CUDA checks of cf2c0f8 (a dropped model gives its device memory back
# at once; test_every_preset_is_finite_in_fp16[13.3b], which ran out of an H100's memory in
# call 1); then, on an H200 only, issue 7's chat bench with the think time and issue 5's decode.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 300 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -s test/test_model_gpu.py \
  -k "dropped or preset" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "rel err|passed|failed" "$OUT/tests.log" | tail -12
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: benches not run"; exit 0; }
OUT=$OUT STEPS=chat_think timeout 150 bash server/bench/gpu_all.sh > /dev/null 2>&1
echo "chat_think: $(grep -E 'turns 2\+ of all|last turn|--think:' "$OUT/chat_think.log" | tr '\n' ' ')"
timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
  --pulses 3 > "$OUT/decode.log" 2>&1
echo "decode rc=$?"; grep -E "^\|" "$OUT/decode.log"
