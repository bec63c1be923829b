#!/usr/bin/env bash
# Session 64, first GPU call (about 8 minutes). Priority order (partial $OUT comes back):
# 0. Session 63's hazard on main (logits_hazard.py).
# 1. Branch logits-outside-pool, applied as lop.patch (git diff main logits-outside-pool -- server
#    test) to a copy of the tree: the hazard check and test_model_gpu.py there.
# 2. Decode at batch 1 / 256 / 1,024, main and branch alternating twice (mm's out= should keep the
#    step's time).
# 3. The served memory after the start, main and branch (the branch's one logits buffer).
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 60 python3 docs/experiments/session63/logits_hazard.py > "$OUT/hazard.log" 2>&1
echo "hazard main rc=$?"; tail -4 "$OUT/hazard.log"
rm -rf /tmp/br && mkdir /tmp/br && cp -a . /tmp/br/ \
  && (cd /tmp/br && patch -p1 -s < docs/experiments/session64/lop.patch) || exit 1
echo "=== branch" >> "$OUT/hazard.log"
(cd /tmp/br && timeout 60 python3 docs/experiments/session63/logits_hazard.py) >> "$OUT/hazard.log" 2>&1
echo "hazard branch rc=$?"; tail -4 "$OUT/hazard.log"
(cd /tmp/br && timeout 220 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider \
  test/test_model_gpu.py) > "$OUT/tests_branch.log" 2>&1
echo "tests branch rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests_branch.log")"
for round in 1 2; do
  for tree in main branch; do
    [ "$tree" = main ] && dir=$PWD || dir=/tmp/br
    echo "=== $tree round $round" >> "$OUT/decode.log"
    (cd "$dir" && timeout 70 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 \
      --state-dtype fp16 --pulses 3) >> "$OUT/decode.log" 2>&1
    echo "decode $tree $round rc=$? at $((SECONDS - T0)) s:"
    sed -n "/=== $tree round $round/,\$p" "$OUT/decode.log" | grep -E "^\| [0-9]"
  done
done
for tree in main branch; do  # the served memory after the start (the branch's logits buffer)
  [ "$tree" = main ] && dir=$PWD || dir=/tmp/br
  echo "=== $tree" >> "$OUT/memory.log"
  (cd "$dir" && timeout 100 python3 -m server.bench memory --demo 2.9b --max-batch 256 \
    --state-dtype fp16) >> "$OUT/memory.log" 2>&1
  echo "memory $tree rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $tree/,\$p" "$OUT/memory.log" | \
    grep -E '^live blocks|^device in use|fused.py:3[01][0-9] head|cuda_graph' | tr '\n' ' ' | cut -c1-900)"
done
