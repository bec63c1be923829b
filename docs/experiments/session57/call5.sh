#!/usr/bin/env bash
# Session 57, GPU call 5 (any card; on an H200 also issue 7's chat bench): call4.sh's checks on
# the final code (ef6579e: call 4's change with _fill_rows on the same helper, and the decode
# bench's --end-probe 0 stand-in mended), and decode at batch 1 / 256 (fp16 state), old / new:
# every pulse now reuses the end probe's buffers.
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
for side in old new; do
  dir=$NEW; [ $side = old ] && dir=$NEW/.whl/ab_old
  (cd "$dir" && PYTHONPATH=/tmp/site:. timeout 100 python3 -m server.bench decode --preset 2.9b \
    --batch 1,256 --state-dtype fp16 --pulses 3) > "$OUT/decode_$side.log" 2>&1
  echo "decode $side:"; grep -E "^\| (1|256) \|" "$OUT/decode_$side.log"
done
timeout 240 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_engine_no_wait_gpu.py \
  test/test_pulse_kernels.py test/test_engine_slots.py test/test_constrained_gpu.py \
  test/test_prefix_cache_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; tail -2 "$OUT/tests.log"
if grep -q H200 "$OUT/gpu.txt"; then
  OUT=$OUT STEPS="chat_raw" timeout 130 bash server/bench/gpu_all.sh > /dev/null 2>&1
  grep -E "turns 2\+ of all|last turn" "$OUT/chat_raw.log"
fi
