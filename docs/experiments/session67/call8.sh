#!/usr/bin/env bash
# Session 67, GPU call 8 (any card): 1) the CUDA tests of the session's changes (the copy-back's
# staging minimum with its padding, the non-finite check); 2) a short prompt's pass at 96-160
# tokens (session 58: 96 tokens 4.6 ms, 158 tokens 5.6: where does the step come from?);
# 3) the pass's products by row count (cuBLAS as served).
#   OUT=$OUT bash docs/experiments/session67/call8.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
md5sum server/scheduler/*.py server/model/*.py server/task/*.py server/api/*.py > "$OUT/md5.txt"
timeout 200 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_copyback.py \
  test/test_nonfinite.py test/test_pulse_kernels.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
timeout 80 python3 -m server.bench prefill --preset 2.9b \
  --cases 1x96,1x112,1x128,1x144,1x160,1x96,1x112,1x128,1x144,1x160 --scheduler 0 \
  > "$OUT/prefill.log" 2>&1
echo "prefill rc=$? at $((SECONDS - T0)) s"; grep -E "^\| 1 x" "$OUT/prefill.log"
timeout 80 python3 -m server.bench gemm --rows 96,112,128,144,160 --configs 0 > "$OUT/gemm.log" 2>&1
echo "gemm rc=$? at $((SECONDS - T0)) s"; grep -E "^\|" "$OUT/gemm.log" | head -30
