#!/usr/bin/env bash
# Session 56, GPU call 6, the final code (after the review's fixes to the prefix cache's host
# logits, the arena's row count and the shutdown's deferred teardown): the CUDA tests of the
# files they touch, then issue 7's chat bench and decode at batch 1 / 256 / 1,024 (fp16 state)
# on whatever card came (asked for nvidia-h200; no card check).
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
timeout 200 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -rA \
  test/test_prefix_cache_gpu.py test/test_copyback.py test/test_engine_slots.py \
  test/test_sdk_threads.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; tail -n 3 "$OUT/tests.log"
OUT=$OUT STEPS="chat_raw" timeout 150 bash server/bench/gpu_all.sh > /dev/null 2>&1
timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
  --pulses 3 > "$OUT/decode.log" 2>&1
echo "decode rc=$?"
grep -E "turns 2\+ of all|last turn" "$OUT/chat_raw.log"
grep -E "^\|" "$OUT/decode.log"
