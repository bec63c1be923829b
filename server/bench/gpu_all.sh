#!/usr/bin/env bash
# Every CUDA test and benchmark of docs/performance.md in one call on the GPU machine:
#   bash server/bench/gpu_all.sh            # logs into $OUT (default /tmp/bench-out)
#   STEPS="decode sample" bash server/bench/gpu_all.sh   # only the steps named
#   STEPS="$OPTIONAL" ...                                 # the exploration steps (not by default)
# Each step has its own time limit and runs whatever happened before it; every log is written
# as it goes (a cut-off call still returns what was done). The default steps took ~6.5 minutes
# on 2026-11-30 before prefill152 was added (~0.7 minutes more, measured: 39 s).
set -u
OUT=${OUT:-/tmp/bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
SUM="$OUT/summary.txt"

OPTIONAL="large large_small sample_clustered http_stages chat chat_raw chat_think chat_tpl chat72 memory gemv152 prefill_gemv ttft_gemv prefill_detail serve ramp clocks first gemm launch constrained fast_forward"
# (the OPTIONAL steps run only when STEPS names them)

wanted() {  # STEPS unset: every step but the OPTIONAL ones; else the steps STEPS names
  if [ -n "${STEPS:-}" ]; then
    case " $STEPS " in *" $1 "*) return 0 ;; esac
    return 1
  fi
  case " $OPTIONAL " in *" $1 "*) return 1 ;; esac
  return 0
}

step() {  # step NAME LIMIT_S COMMAND... (output appended to $OUT/NAME.log)
  local name=$1 limit=$2
  shift 2
  wanted "$name" || return 0
  echo "=== $name: $* (start $(date -u +%T))" | tee -a "$SUM"
  timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name: rc=$rc (end $(date -u +%T))" | tee -a "$SUM"
  grep -E "^\||passed|failed|error|rel err|STOPPED|^clocks:" "$OUT/$name.log" | tail -n 80 >>"$SUM"
}

{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem \
    --format=csv; python3 -c "import torch, triton; print('torch', torch.__version__, \
'triton', triton.__version__)"; git log -1 --format='commit %h %s' 2>/dev/null; } | tee -a "$SUM"

# (-o addopts: the machine's python3 has no pytest-xdist for the CPU suite's ``-n auto``)
step tests 420 python3 -m pytest -o addopts= -m gpu -q -s -p no:cacheprovider -rA test/test_model_gpu.py \
  test/test_fused_kernels.py test/test_prefix_cache_gpu.py test/test_copyback.py \
  test/test_sampler.py test/test_pulse_kernels.py test/test_gemv.py \
  test/test_engine_no_wait_gpu.py test/test_split_invariance_gpu.py test/test_wkv_kernels.py \
  test/test_mid_export.py test/test_engine_slots.py test/test_logprobs_gpu.py \
  test/test_constrained_gpu.py -k "not every_preset"
step decode 110 python3 -m server.bench decode --preset 2.9b --batch 1,4,16,32,256,1024 \
  --state-dtype fp16,fp32 --pulses 3
step sample 60 python3 -m server.bench sample --batch 1,32,256,1024
step sample_clustered 60 python3 -m server.bench sample --batch 1,32,256,1024 --clustered 1
step large 90 python3 -m server.bench large --batch 1024,256
step large_small 40 python3 -m server.bench large --batch 16,1 --only time_mix --state-dtype fp16
step stress 100 python3 -m server.bench stress --preset 2.9b --tasks 256 --max-tokens 2000 \
  --buffer-size 32 --temperature 1.0 --deadline 80
step prefill 110 python3 -m server.bench prefill --preset 2.9b --cases 1x4096,64x512
step prefill152 45 python3 -m server.bench prefill --preset 2.9b --cases 1x152 --scheduler 0 \
  --profile 152  # a cached chat turn's pass (152 tokens, the 160 bucket), by kernel
step first 150 python3 -m server.bench first --demo tiny  # kernels compiled after the warm-up
step gemm 120 python3 -m server.bench gemm  # the prefill products: cuBLAS against Triton GEMMs
step profile 60 python3 -m server.bench decode --preset 2.9b --batch 1,1024 --state-dtype fp16 \
  --profile 1,1024 --pulses 2
step decode72 45 python3 -m server.bench decode --preset 7.2b --batch 256 --state-dtype fp16 --pulses 3
step ttft 130 python3 -m server.bench ttft --preset 2.9b --repeat 2 --sync-prefill 0 --timeline
step http_stages 240 python3 -m server.bench.http_stages --demo 2.9b  # where HTTP time goes,
# a fresh server's first request (turn 1) included; the demo makes its random weights (~11 s)
step ttft_server 100 python3 -m server.bench ttft --preset 2.9b --repeat 4 --sync-prefill 0
step host 30 python3 -m server.bench host  # the scheduler's host work (prefix hashes, ...)
# the skinny-product kernel at a short prompt's rows against cuBLAS (the cached chat turn's
# pass; slower than cuBLAS in session 14, so not used by the server above 16 rows)
step gemv152 260 python3 -m server.bench gemv --preset 2.9b --rows 160 --sweep 160 \
  --products "r,k,v,output,ffn,lora" --block-n 64,128 --block-k 64,128 --warps 4,8 --stages 3 \
  --split 1,2,4 --block-m 32,64
step prefill_gemv 90 python3 -m server.bench prefill --preset 2.9b --cases 1x152,1x192 \
  --scheduler 0 --profile 152 --gemv-rows 256
step ttft_gemv 130 python3 -m server.bench ttft --preset 2.9b --repeat 2 --sync-prefill 0 \
  --gemv-rows 256
step chat 300 python3 -m server.bench.chat --demo 2.9b --repeat 3  # issue 7 over HTTP: two
# servers, three conversations (each server makes the demo's random weights, ~11 s at 2.9B)
step chat_raw 300 python3 -m server.bench.chat --demo 2.9b --repeat 3 --client raw  # the same
# from a minimal socket client (server.bench.raw_client): without httpx's own Python work
step chat_think 300 python3 -m server.bench.chat --demo 2.9b --repeat 3 --client raw --think
# the same with a user's think time: each turn once the reply's history is computed (every
# turn then feeds only its new message; without it every second turn feeds the reply again)
step chat_tpl 300 python3 -m server.bench.chat --demo 2.9b --repeat 3 --client raw --template
# the same with the system prompt as a state template the turns name (rwkv-7:_TMPL_…)
# a served process's device memory (2.9B, batch 256, fp16 state) by the line that allocated it,
# after its start and under a load of 256 requests (with the peak's tensors by line)
step memory 180 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
  --load 256
# a single-sequence pass's host time (the graph's launch) against its device time
step launch 150 python3 -m server.bench launch --preset 2.9b --tokens 158,400,1024
# 64 prompts of 512 through the scheduler, step by step (session 15 found it slow: 36,145 tok/s)
step prefill_detail 120 python3 -m server.bench prefill --preset 2.9b --cases 64x512 --detail
# served throughput over HTTP: 256 streamed requests of 1,000 tokens against run.py --demo 2.9b
step serve 150 bash server/bench/serve_load.sh
# the pulse ramp under a stream of arrivals at batch 1,024 (session 16: 22-48k tok/s a pulse
# while served streams trickled in): every start ramps (the server's rule) against ramps at
# least 32 steps apart, 1,024 tasks arriving at 200 a second
for gap in 0 32; do
  step ramp 110 python3 -m server.bench stress --preset 2.9b --tasks 1024 --max-batch-size 1024 \
    --max-tokens 500 --state-dtype fp16 --arrivals-per-s 200 --ramp-gap $gap --deadline 90
done
# the clocks and power the GPU holds through a long decode run at batch 1,024 and through each
# product of a layer replayed for 3 s (session 17: the board at its 700 W limit, SM clock below
# its maximum)
step clocks 200 bash server/bench/with_clocks.sh python3 -m server.bench decode --preset 2.9b \
  --batch 1024 --state-dtype fp16 --pulses 20
step clocks 200 bash server/bench/with_clocks.sh python3 -m server.bench gemv --preset 2.9b \
  --rows 1024 --tiles --sustain 3
step chat72 560 python3 -m server.bench.chat --demo 7.2b --repeat 3  # the same at the 7.2B shape
step constrained 120 python3 -m server.bench decode --preset 2.9b --batch 1,32,256 \
  --state-dtype fp16 --pulses 3 --constrained 0,1,0,1  # a constrained row's host read a step
# the Guide's host time a step against the step, one row and every row constrained, at a
# small model (a short step) and at 2.9B (session 48: +3 % with one row at 2.9B)
for p in 0.1b 2.9b; do
  step constrained 120 python3 docs/experiments/session48/constrained_steps.py --preset $p \
    --batch 1,32,256 --rows 1,all
done
# a forced call's reply as a server runs it (one daemon scheduler), fed runs a graphed pass
# each (as served) and grouped in one eager pass (session 47's form)
for g in 0 1; do
  step fast_forward 200 python3 docs/experiments/session48/ff_daemon.py --preset 2.9b \
    --device cuda --dtype fp16 --repeat 5 --grouped $g
done
# separately (each call is limited to 10 minutes): the skinny-product sweep, the profile and the
# ablations:
#   python3 -m server.bench gemv --preset 2.9b --rows 1,2,4,8,16 --sweep 1,4,16 --large
#   python3 -m server.bench decode --preset 2.9b --batch 1,256 --fused 0 --pulses 3
#   python3 -m server.bench pulse --preset 2.9b --profile     # the first-token pulse alone
#   python3 -m pytest -m gpu test/test_model_gpu.py::test_every_preset_is_finite_in_fp16
echo "=== all done $(date -u +%T)" | tee -a "$SUM"
