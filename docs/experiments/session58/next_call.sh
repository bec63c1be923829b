#!/usr/bin/env bash
# Written in session 58 for the next GPU session (not run): the checks session 58 could not
# make, in one call of < 10 minutes. Exits 3 at once on a card other than an H200 unless
# ANY_CARD=1.
# 1. the CUDA tests of the prefill path 550e564 changed (its hand-off from the pass to the
#    head) and of the prefix cache: test_split_invariance_gpu.py, test_prefix_cache_gpu.py,
#    test_model_gpu.py, test_engine_no_wait_gpu.py;
# 2. issue 7's chat bench with the think time (`chat --think`, every turn feeding its message
#    alone) and without it (`chat_raw`, the recorded configuration), 2.9B, --repeat 3;
# 3. issue 5's decode at batch 1 / 256 / 1,024 (fp16 state).
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
[ -n "${ANY_CARD:-}" ] || grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
timeout 200 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider \
  test/test_split_invariance_gpu.py test/test_prefix_cache_gpu.py test/test_model_gpu.py \
  test/test_engine_no_wait_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; tail -2 "$OUT/tests.log"
for step in chat_think chat_raw; do
  OUT=$OUT STEPS=$step timeout 150 bash server/bench/gpu_all.sh > /dev/null 2>&1
  echo "$step: $(grep -E 'turns 2\+ of all|last turn|--think:' "$OUT/$step.log" | tr '\n' ' ')"
done
timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
  --pulses 3 > "$OUT/decode.log" 2>&1
echo "decode rc=$?"; grep -E "^\|" "$OUT/decode.log"
