#!/usr/bin/env bash
# Written in session 63 for the next GPU session (not run). About 9-10 minutes; any card (A/Bs on one
# machine), the H200 part only there. At most 8 files come back: logs are grouped.
# 0. The review's hazard (docs/reliability.md, session 63): can one decode graph's replay change
#    another's borrowed logits (logits_hazard.py, a small model, seconds)? If so, fix it before
#    anything else: branch logits-outside-pool (72fbef1, not run on a GPU) allocates the decode
#    graphs' logits before their capture; run logits_hazard.py and test_model_gpu.py there, and
#    decode at batch 1 / 256 / 1,024 against main (mm's out= should keep the step's time).
# 1. Is the ~5 MiB outside PyTorch that each capture brings (session 63, call 1) the graphs or the
#    kernels their warm-ups load? rest_split.py as served, with no prefill graph past 512 tokens
#    (26 -> 24 graphs, the pool's working set halved) and with buckets every 32 tokens to 512
#    (26 -> 18 graphs: the cached chat turn's pass padded by up to 31 tokens instead of 15);
#    its "segments by (stream, type)" line tells which streams hold the small-block segments.
# 2. The seed's stress test with copy-back budgets of 1,024 and 256 MiB (session 62's plan): what
#    a smaller budget costs (the scheduler waits for the copy-back when many rows finish at once).
# 3. On an H200: decode at batch 1 / 256 / 1,024 and issue 7's chat (the targets' card; not
#    measured since session 61).
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 60 python3 docs/experiments/session63/logits_hazard.py > "$OUT/hazard.log" 2>&1
echo "logits_hazard rc=$?"; tail -6 "$OUT/hazard.log"
for opt in "" "--graph-tokens 512" "--coarse"; do
  echo "=== rest_split $opt" >> "$OUT/rest_split.log"
  timeout 100 python3 docs/experiments/session63/rest_split.py $opt >> "$OUT/rest_split.log" 2>&1
  echo "rest_split [$opt] rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== rest_split $opt\$/,\$p" \
    "$OUT/rest_split.log" | grep -E '^after warm-up|^sums|^pool' | tr '\n' ' ' | cut -c1-600)"
done
for mb in 1024 256 1024 256; do
  echo "=== copyback $mb" >> "$OUT/stress.log"
  timeout 100 python3 -m server.bench stress --preset 2.9b --tasks 256 --max-tokens 2000 \
    --buffer-size 32 --temperature 1.0 --deadline 80 --state-dtype fp16 --copyback-mb $mb \
    >> "$OUT/stress.log" 2>&1
  echo "stress copyback $mb rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== copyback $mb/,\$p" \
    "$OUT/stress.log" | grep -E 'whole-run|peak:|copy-back' | tail -3 | tr '\n' ' ')"
done
if grep -q H200 "$OUT/gpu.txt"; then
  timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
    --pulses 3 > "$OUT/decode.log" 2>&1
  echo "decode rc=$?"; grep -E "^\| [0-9]" "$OUT/decode.log"
  timeout 100 python3 -m server.bench.chat --demo 2.9b --repeat 2 --client raw --think \
    > "$OUT/chat.log" 2>&1
  echo "chat rc=$?: $(grep -E 'turns 2\+ of all|last turn' "$OUT/chat.log" | head -2 | tr '\n' ' ')"
fi
