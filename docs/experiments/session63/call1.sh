#!/usr/bin/env bash
# Session 63, call 1 (~6 minutes, any card), most wanted first (device time was short):
# 1. where the memory above the floors goes after the start (rest_split.py), with one pool
#    for every graph (as served since this session's change) and with the prefill graphs apart;
# 2. session 62's untested GPU tests (split invariance, the prefill graphs' exports) and the
#    graph tests of test_model_gpu.py (the shared pool's among them);
# 3. the served memory under load with passes of 4,096 tokens and a copy-back budget of 256 MiB.
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
for share in "" --separate-pools; do
  echo "=== rest_split $share" >> "$OUT/rest_split.log"
  timeout 120 python3 docs/experiments/session63/rest_split.py $share >> "$OUT/rest_split.log" 2>&1
  echo "rest_split $share rc=$? at $((SECONDS - T0)) s"
done
grep -v "| INFO\|WARNING\|^| \(decode\|prefill\)" "$OUT/rest_split.log" | tail -90
timeout 150 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider \
  test/test_split_invariance_gpu.py test/test_mid_export.py \
  test/test_model_gpu.py::test_decode_and_prefill_graphs_share_one_pool_and_interleave \
  test/test_model_gpu.py::test_cuda_graph_prefill_equals_eager test/test_model_gpu.py::test_cuda_graph_decode_equals_eager \
  test/test_model_gpu.py::test_later_captures_make_no_new_stream test/test_model_gpu.py::test_capture_survives_garbage_collection_of_old_graphs > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
echo "=== p4096c256" >> "$OUT/memory.log"
timeout 120 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
  --load 256 --prefill-tokens 4096 --copyback-mb 256 >> "$OUT/memory.log" 2>&1
echo "memory rc=$? at $((SECONDS - T0)) s: $(grep -E 'after the warm-up:|^device in use|after a load' \
  "$OUT/memory.log" | tr '\n' ' ' | cut -c1-700)"
