#!/usr/bin/env bash
# Session 68, call 3: the one-kernel token loop's third form (a chunk's pre_wkv into a
# program's scratch, the loop, the chunk's post_wkv; a persistent grid): its CUDA tests, then
# its launch options against the three launches through the engine (seq_variants.py).
#   OUT=$OUT bash docs/experiments/session68/call3.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 150 python3 -m pytest -o addopts= -m gpu -q -s -p no:cacheprovider \
  test/test_wkv_seq_kernel.py test/test_fused_kernels.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
grep -E "rel err|seq kernel ok" "$OUT/tests.log" | head -8
timeout 300 python3 docs/experiments/session68/seq_variants.py --rounds 2 > "$OUT/variants.log" 2>&1
echo "variants rc=$? at $((SECONDS - T0)) s"
grep -E "^round|^#|Error" "$OUT/variants.log"
