#!/usr/bin/env bash
# Session 63, call 2 (~2-3 minutes, any card): call1.sh cut to what little device time was left.
# (Ran at 9183a4b, where rest_split.py had --separate-pools; after 6d64359 was reverted it has
# --share-pool instead.)
# 1. the GPU tests of the graphs, the new shared pool's first; 2. rest_split.py as served (one
# pool), then with the prefill graphs' pool apart, each while time lasts.
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
t=test/test_model_gpu.py
timeout 90 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider \
  $t::test_decode_and_prefill_graphs_share_one_pool_and_interleave \
  $t::test_cuda_graph_prefill_equals_eager $t::test_cuda_graph_decode_equals_eager \
  $t::test_later_captures_make_no_new_stream > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
for share in "" --separate-pools; do
  echo "=== rest_split $share" >> "$OUT/rest_split.log"
  timeout 100 python3 docs/experiments/session63/rest_split.py $share >> "$OUT/rest_split.log" 2>&1
  echo "rest_split $share rc=$? at $((SECONDS - T0)) s"
  grep -v "| INFO\|WARNING\|^| \(decode\|prefill\)" "$OUT/rest_split.log" | sed -n "/=== rest_split $share\$/,\$p" | tail -45
done
