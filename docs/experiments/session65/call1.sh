#!/usr/bin/env bash
# Session 65, first GPU call (about 8-9 minutes, any card; A/Bs on one machine).
# 0. The GPU tests at this tree: session 64's CPU-only changes (74bff84's GraphedDecode eviction
#    and pruning under CAPTURE_LOCK, linear_logits, out_key's removal) and the copy-back's early
#    release (the budget given back once the rows are in the pinned staging buffer, before they
#    are cloned: early_release.patch) had not run on a GPU.
# 1. The seed's stress test: copy-back budget 256 MiB without the early release ("old": this
#    tree with the patch reversed, in /tmp/old) and with it ("new"), and 1,024 MiB with it;
#    alternating, twice (session 64, one run each, old code: 1,024 86 %, 256 81 % of peak).
# 2. The served memory with the early release at copy-back 1,024 / 256.
# 3. Decode at batch 1,024 with and without the small cuBLAS workspaces run.py sets since
#    session 64 (not timed there at 1,024), if time is left (next_call.sh has the longer form).
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
timeout 120 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_model_gpu.py \
  test/test_copyback.py -k "graph or logits or copy" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
rm -rf /tmp/old && mkdir /tmp/old && cp -a . /tmp/old/ && \
  (cd /tmp/old && patch -R -p1 -s < docs/experiments/session65/early_release.patch) || exit 1
stress() {  # $1 label, $2 tree, $3 budget MiB
  echo "=== $1 $3" >> "$OUT/stress.log"
  (cd "$2" && timeout 100 python3 -m server.bench stress --preset 2.9b --tasks 256 \
    --max-tokens 2000 --buffer-size 32 --temperature 1.0 --deadline 80 --state-dtype fp16 \
    --copyback-mb "$3") >> "$OUT/stress.log" 2>&1
  echo "stress $1 $3 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1 $3/,\$p" "$OUT/stress.log" \
    | grep -E 'peak memory|whole-run|copy-back' | tr '\n' ' ' | cut -c1-400)"
}
for round in 1 2; do
  [ $round = 1 ] || [ $((SECONDS - T0)) -lt 180 ] || break
  stress old /tmp/old 256
  stress new . 256
  stress new . 1024
done
for mb in 256 0; do
  [ $((SECONDS - T0)) -lt 280 ] || break
  echo "=== copyback $mb" >> "$OUT/memory.log"
  timeout 120 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
    --load 256 --copyback-mb $mb >> "$OUT/memory.log" 2>&1
  echo "memory $mb rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== copyback $mb/,\$p" "$OUT/memory.log" \
    | grep -E '^device in use|after a load' | tr '\n' ' ' | cut -c1-600)"
done
small() { CUBLAS_WORKSPACE_CONFIG=:4096:2 CUBLASLT_WORKSPACE_SIZE=4096 "$@"; }
plain() { "$@"; }
for ws in plain small; do
  [ $((SECONDS - T0)) -lt 330 ] || break
  echo "=== $ws" >> "$OUT/decode.log"
  $ws timeout 50 python3 -m server.bench decode --preset 2.9b --batch 1024 --state-dtype fp16 \
    --pulses 3 >> "$OUT/decode.log" 2>&1
  echo "decode $ws rc=$? at $((SECONDS - T0)) s: $(grep -E '^\| [0-9]' "$OUT/decode.log" | tail -1)"
done
