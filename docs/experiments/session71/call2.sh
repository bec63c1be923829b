#!/usr/bin/env bash
# Session 71, call 2: the rest of the CUDA tests with the packed LoRA stacks and the small
# weights' buffer (call 1 ran 27 of the model/fused tests before its 150 s cut, all passed).
#   OUT=$OUT bash docs/experiments/session71/call2.sh
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
DONE="matches_reference or decode_paths or side_stream or dropped or cuda_graph_decode_equals_eager"
timeout 560 python3 -m pytest -o addopts= -m gpu -p no:cacheprovider -rfE \
  test/test_model_gpu.py test/test_split_invariance_gpu.py test/test_prefix_cache_gpu.py \
  test/test_constrained_gpu.py test/test_copyback.py test/test_embedding.py \
  test/test_engine_no_wait_gpu.py test/test_engine_slots.py test/test_gemv.py \
  test/test_logprobs_gpu.py test/test_mid_export.py test/test_nonfinite.py \
  test/test_pulse_kernels.py test/test_sampler.py test/test_state_weights.py \
  test/test_wkv_seq_kernel.py test/test_fused_kernels.py test/test_wkv_kernels.py \
  -k "not ($DONE)" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s"; tail -3 "$OUT/tests.log"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -10
