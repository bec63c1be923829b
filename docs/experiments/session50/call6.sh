#!/usr/bin/env bash
# Session 50, GPU call 6: the penalties' decay moved from the logits' pass (prepare) to the
# update after the step (decay_in_update.diff, the tree's change): the CUDA sampler and pulse
# tests, then decode at batch 1 and 256 (the bench's rows: penalty decay 1, the decay's pass skipped)
# new, old, new.
set -u
OUT=${OUT:-/tmp/out}
timeout 150 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -rA test/test_sampler.py \
  test/test_pulse_kernels.py test/test_engine_no_wait_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -8
D="docs/experiments/session50/decay_in_update.diff"
for v in new old new; do
  if [ $v = old ]; then patch -R -p1 < $D > /dev/null || exit 1; fi
  timeout 90 python3 -m server.bench decode --preset 2.9b --batch 1,256 --state-dtype fp16 \
    --pulses 3 > "$OUT/decode_$v.log" 2>&1
  echo "== $v rc=$?"; grep -E "^\| [0-9]" "$OUT/decode_$v.log" | head -4
  cat "$OUT/decode_$v.log" >> "$OUT/decode_all.log"
  if [ $v = old ]; then patch -p1 < $D > /dev/null || exit 1; fi
done
