#!/usr/bin/env bash
# Written in session 59 for the next GPU session (not run). Exits 3 at once on a card other
# than an H200 unless ANY_CARD=1. In < 10 minutes:
# 1. `server.bench memory` (new in d43ed40, never run on a GPU): a served 2.9B's device memory
#    at batch 256, fp16 state, by allocating line; then the same with the allocator's
#    expandable segments (fewer cached blocks between reserved and allocated?);
# 2. the GPU tests of session 59's changes (a dropped model's memory, one warm-up stream);
# 3. issue 7's chat bench with the think time, 2.9B, --repeat 3 (H200: the target's machine);
# 4. issue 5's decode at batch 1 / 256 / 1,024 (fp16 state);
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
[ -n "${ANY_CARD:-}" ] || grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
timeout 120 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
  > "$OUT/memory.log" 2>&1
echo "memory rc=$?"; grep -E "after the warm-up|^\||live blocks" "$OUT/memory.log" | head -40
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 python3 -m server.bench memory \
  --demo 2.9b --max-batch 256 --state-dtype fp16 > "$OUT/memory_expandable.log" 2>&1
echo "expandable rc=$?"; grep -E "after the warm-up|live blocks" "$OUT/memory_expandable.log"
timeout 120 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_model_gpu.py \
  -k "dropped or later_captures or graph" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; tail -1 "$OUT/tests.log"
OUT=$OUT STEPS=chat_think timeout 150 bash server/bench/gpu_all.sh > /dev/null 2>&1
echo "chat_think: $(grep -E 'turns 2\+ of all|last turn|--think:' "$OUT/chat_think.log" | tr '\n' ' ')"
timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
  --pulses 3 > "$OUT/decode.log" 2>&1
echo "decode rc=$?"; grep -E "^\|" "$OUT/decode.log"
# 5. where .whl/ab_rows exists (`git archive 4c8c04c ...`, ab_rows_on.sh's header): the chat
#    bench at HEAD against the code before 550e564, new / old / new (~2 minutes)
if [ -d .whl/ab_rows/server ]; then
  OUT=$OUT bash docs/experiments/session59/ab_rows_on.sh | grep -E "^(new|old)"
else
  echo "no .whl/ab_rows: ab_rows_on.sh not run"
fi
