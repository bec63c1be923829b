#!/usr/bin/env bash
# Session 50, GPU call 4: batched prefill under the old and the new WKV rule (chunked_ab.py),
# then the CUDA tests the rule touches, with the new rule (the tree's rule at the time: the
# tests ran on it; since reverted, see chunked_ab.py).
set -u
OUT=${OUT:-/tmp/out}
export PYTHONPATH=${PYTHONPATH:-}:.
for rule in old new; do
  timeout 150 python3 docs/experiments/session50/chunked_ab.py $rule prefill --preset 2.9b \
    --cases 64x512,16x256,8x160,4x512 --repeat 4 > "$OUT/prefill_$rule.log" 2>&1
  echo "== $rule rc=$?"; grep -E "^\| [0-9]" "$OUT/prefill_$rule.log"
  cat "$OUT/prefill_$rule.log" >> "$OUT/prefill_all.log"
done
timeout 280 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -rA \
  test/test_split_invariance_gpu.py test/test_prefix_cache_gpu.py test/test_model_gpu.py \
  test/test_prefix_cache_exact.py -k "not every_preset" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -15
