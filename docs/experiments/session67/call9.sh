#!/usr/bin/env bash
# Session 67, GPU call 9 (any card): the CUDA tests after the session's last changes (the
# weights digest and its stamping, the non-finite check, the copy-back's staging minimum), with
# the GPU tests of the model's graphs and the engine's no-wait path; then a served 2.9B demo's
# chat over HTTP, one conversation (the digest, stamping and checks on the served path).
#   OUT=$OUT bash docs/experiments/session67/call9.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
md5sum server/scheduler/*.py server/model/*.py server/task/*.py server/api/*.py > "$OUT/md5.txt"
timeout 260 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_state_weights.py \
  test/test_nonfinite.py test/test_pulse_kernels.py test/test_copyback.py \
  test/test_model_gpu.py test/test_engine_no_wait_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
if [ "${CHAT:-1}" = 1 ]; then
  timeout 150 python3 -m server.bench.chat --demo 2.9b --repeat 1 --client raw --think \
    > "$OUT/chat.log" 2>&1
  echo "chat rc=$? at $((SECONDS - T0)) s: $(grep -E 'turns 2\+ of all|last turn' "$OUT/chat.log" \
    | head -2 | tr '\n' ' ')"
fi
