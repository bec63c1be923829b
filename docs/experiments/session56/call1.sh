#!/usr/bin/env bash
# Session 56, GPU call 1 (H200_ONLY=1: exits 3 at once on another card; the first try got an
# H100 and exited, the second ran on that H100 with H200_ONLY unset). Issue 7 over HTTP
# at 2.9B: HEAD (76478e3: session 55's final code, in .whl/ab_old from `git archive HEAD server
# run.py few_shot.txt eof_v20230424.txt pyproject.toml`) against the working tree (HEAD +
# docs/experiments/session55/logits_arena.patch: whole-prompt logits kept in the host arena's
# rows), alternating, old first; then the patched tree's prefix-cache CUDA tests.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
[ -z "${H200_ONLY:-}" ] || grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 3; }
for tree in old new old new; do
  if [ $tree = new ]; then d=.; else d=.whl/ab_old; fi
  echo "=== tree $tree ($(date -u +%T))" | tee -a "$OUT/ab.log"
  (cd $d && PYTHONPATH=/tmp/site:. timeout 150 python3 -m server.bench.chat --demo 2.9b --repeat 3 \
    --client raw >> "$OUT/ab.log" 2>&1; echo "rc=$?" >> "$OUT/ab.log")
done
grep -E "^===|rc=|turns 2\+ of all|last turn" "$OUT/ab.log"
timeout 150 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -rA \
  test/test_prefix_cache_gpu.py test/test_prefix_cache.py test/test_prefix_cache_exact.py \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; tail -n 5 "$OUT/tests.log"
