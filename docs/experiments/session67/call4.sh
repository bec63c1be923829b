#!/usr/bin/env bash
# Session 67, GPU call 4: the non-finite row check (engine.REASON_NONFINITE; nonfinite.patch is
# its server/ diff). 1) its CUDA tests; 2) decode at batch 1 / 256 / 1,024 with and without it
# (the old tree: this one with the patch reversed, in /tmp/old), alternating; 3) the seed's
# stress test once (512,000 tokens at temperature 1 on random 2.9B weights: no row may break).
#   OUT=$OUT bash docs/experiments/session67/call4.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
md5sum server/scheduler/*.py server/model/*.py server/task/*.py server/api/*.py > "$OUT/md5.txt"
timeout 150 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_nonfinite.py \
  test/test_pulse_kernels.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
[ -d /tmp/old ] || { mkdir /tmp/old && cp -a . /tmp/old/ && \
  (cd /tmp/old && patch -R -p1 -s < docs/experiments/session67/nonfinite.patch); } || exit 1
for v in "new ." "old /tmp/old" "new ." "old /tmp/old"; do
  set -- $v
  echo "=== $1" >> "$OUT/decode.log"
  (cd "$2" && timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 \
    --state-dtype fp16 --pulses 3) >> "$OUT/decode.log" 2>&1
  echo "decode $1 rc=$? at $((SECONDS - T0)) s: $(grep -E '^\| [0-9]' "$OUT/decode.log" \
    | tail -3 | cut -d'|' -f2-4 | tr '\n' ' ')"
done
timeout 70 python3 -m server.bench stress --preset 2.9b --tasks 256 --max-tokens 2000 \
  --buffer-size 32 --temperature 1.0 --deadline 50 --state-dtype fp16 > "$OUT/stress.log" 2>&1
echo "stress rc=$? at $((SECONDS - T0)) s: $(grep -E 'output tokens|whole-run' "$OUT/stress.log" \
  | tr '\n' ' ' | cut -c1-300); rows broken: $(grep -c 'Non-finite' "$OUT/stress.log")"
