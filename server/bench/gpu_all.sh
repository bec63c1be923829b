#!/usr/bin/env bash
# Every CUDA test and benchmark of docs/performance.md in one call on the GPU machine:
#   bash server/bench/gpu_all.sh            # logs into $OUT (default /tmp/bench-out)
# Each step has its own time limit and runs whatever happened before it; every log is written
# as it goes (a cut-off call still returns what was done). At most 7 files land in $OUT.
set -u
OUT=${OUT:-/tmp/bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
SUM="$OUT/summary.txt"

step() {  # step NAME LIMIT_S COMMAND... (output appended to $OUT/NAME.log)
  local name=$1 limit=$2
  shift 2
  echo "=== $name: $* (start $(date -u +%T))" | tee -a "$SUM"
  timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name: rc=$rc (end $(date -u +%T))" | tee -a "$SUM"
  grep -E "^\||passed|failed|error|rel err|STOPPED" "$OUT/$name.log" | tail -n 80 >>"$SUM"
}

{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem \
    --format=csv; python3 -c "import torch, triton; print('torch', torch.__version__, \
'triton', triton.__version__)"; git log -1 --format='commit %h %s' 2>/dev/null; } | tee -a "$SUM"

step tests 90 python3 -m pytest -m gpu -q -s -p no:cacheprovider test/test_fused_kernels.py \
  test/test_model_gpu.py -k "fused or ((matches_reference or graph_decode) and not torch)"
step tests 60 python3 -m pytest -m gpu -q -s -p no:cacheprovider test/test_copyback.py \
  test/test_prefix_cache_gpu.py
step decode 120 python3 -m server.bench decode --preset 2.9b --batch 1,32,256,1024 \
  --state-dtype fp32,fp16 --profile 1,256,1024
step stress 120 python3 -m server.bench stress --preset 2.9b --tasks 256 --max-tokens 2000 \
  --buffer-size 32 --temperature 1.0 --deadline 90
step prefill 70 python3 -m server.bench prefill --preset 2.9b --cases 1x4096,64x512
step decode72 60 python3 -m server.bench decode --preset 7.2b --batch 256 --state-dtype fp32,fp16
step tests 80 python3 -m pytest -m gpu -q -s -p no:cacheprovider \
  "test/test_model_gpu.py::test_every_preset_is_finite_in_fp16"
step ablation 60 python3 -m server.bench decode --preset 2.9b --batch 1,256 --fused 0 --pulses 3
step ablation 30 python3 -m server.bench decode --preset 2.9b --batch 1 --graphs 0 --pulses 3
echo "=== all done $(date -u +%T)" | tee -a "$SUM"
