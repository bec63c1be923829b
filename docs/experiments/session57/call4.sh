#!/usr/bin/env bash
# Session 57, GPU call 4 (any card; on an H200 also issue 7's chat bench and decode): the first
# token's pulse with its consecutive kept rows as a slice (no index upload) and the end probe's
# pinned flags reused between pulses, against HEAD without them (`.whl/ab_old`, `git archive`):
# `server.bench pulse --preset 2.9b --prompt 158 --repeat 40`, old / new / old / new; then the
# CUDA tests of the engine's pulse (no host wait, the pulse kernels, the slots, constrained rows,
# the prefix cache).
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
NEW=$PWD
for round in 1 2; do
  for side in old new; do
    dir=$NEW; [ $side = old ] && dir=$NEW/.whl/ab_old
    (cd "$dir" && PYTHONPATH=/tmp/site:. timeout 120 python3 -m server.bench pulse --preset 2.9b \
      --prompt 158 --repeat 40) > "$OUT/pulse_${side}_$round.log" 2>&1
    echo "$side $round: $(grep -E '^\| merged' "$OUT/pulse_${side}_$round.log")"
  done
done
timeout 240 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_engine_no_wait_gpu.py \
  test/test_pulse_kernels.py test/test_engine_slots.py test/test_constrained_gpu.py \
  test/test_prefix_cache_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; tail -3 "$OUT/tests.log"
if grep -q H200 "$OUT/gpu.txt"; then
  OUT=$OUT STEPS="chat_raw" timeout 130 bash server/bench/gpu_all.sh > /dev/null 2>&1
  timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
    --pulses 3 > "$OUT/decode.log" 2>&1
  grep -E "turns 2\+ of all|last turn" "$OUT/chat_raw.log"
  grep -E "^\|" "$OUT/decode.log"
fi
