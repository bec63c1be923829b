#!/usr/bin/env bash
# Session 62, call 2: the served memory after 194e2c3 (a fused prefill pass drops its six mixes
# after the products and keeps the first layer's value alone, not layer 0's whole r/k/v) and
# with RWKV_PREFILL_TOKENS (599c62e) lowered to 4,096; base = 46debcc (.whl/ab_base: `git
# archive 46debcc server run.py few_shot.txt eof_v20230424.txt pyproject.toml`). Expandable
# segments are run.py's default again at both (a38691e), so `server.bench memory` runs under
# them. Then the CUDA tests of the fused path, the model and the prefix cache, in the time left
# of BUDGET seconds (440: the device time left this session allowed no more; the prefill A/B
# moved to call3.sh).
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
mem() {  # name, directory, prefill tokens
  echo "=== $1" >> "$OUT/memory.log"
  (cd "$2" && timeout 150 python3 -m server.bench memory --demo 2.9b --max-batch 256 \
    --state-dtype fp16 --load 256 --prefill-tokens $3 >> "$OUT/memory.log" 2>&1)
  echo "memory $1 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1/,\$p" "$OUT/memory.log" | \
    grep -E 'after the warm-up:|^device in use|after a load|at that peak|^stack limit|^Triton kernels' | tr '\n' ' ' | cut -c1-900)"
}
mem new16384 . 16384
mem old16384 .whl/ab_base 16384
mem new4096 . 4096
left=$((${BUDGET:-440} - (SECONDS - T0)))
timeout $left python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider \
  test/test_fused_kernels.py test/test_model_gpu.py test/test_prefix_cache_gpu.py \
  -k "not every_preset" > "$OUT/tests.log" 2>&1
echo "tests rc=$? (${left}s): $(tail -1 "$OUT/tests.log")"
