#!/usr/bin/env bash
# Written in session 65 for the next GPU session (not run: session 65's two machines were taken
# back mid-call, and no other came). One step a call, each about 2-4 minutes, so a machine
# taken back loses little: STEP=tests, then stress, memory, decode, chat (H200 only).
#   OUT=$OUT STEP=tests bash docs/experiments/session65/next_call.sh
# (Session 66, an H100 for ~6 minutes: the tests step's test_copyback.py and test_model_gpu.py
# passed and clone_threads.py ran (session66/gpu_call1); the stress step's "new" runs ran twice
# each (gpu_call2-5) and 256 MiB became the default. Left: test_engine_no_wait_gpu.py, the
# "old" stress runs (optional now), memory (at the new default: "0"), decode, chat. ROUNDS=1 /
# ROUNDS=2 split the stress step into a call each.)
# tests:  the CUDA code that has run on the CPU only: session 64's GraphedDecode eviction and
#         pruning under CAPTURE_LOCK (74bff84), fused.linear_logits, out_key's removal; session
#         65's copy-back (copyback.patch: the budget given back once a group is in the pinned
#         staging buffer; rows gathered in the state's layout, no intermediate; the CUDA test's
#         bound tightened to the budget alone).
# stress: the seed's stress test, copy-back budget 256 MiB before session 65's copy-back
#         changes ("old": this tree with copyback.patch reversed, in /tmp/old) and after
#         ("new"), and 1,024 MiB after; alternating, twice (session 64, one run each, old
#         code: 1,024 86 %, 256 81 % of peak; copy-back thread 346 / 1,141 ms).
# memory: the served memory after a load, copy-back 256 (the default since session 66) / 1,024, new code
#         (session 64, old code: 10.16 / 10.86 GiB after the load, peak allocated 8.84 / 9.32).
# decode: batch 1 / 256 / 1,024 with and without the small cuBLAS workspaces run.py sets since
#         session 64 (1,024 not timed with them), alternating, twice.
# chat:   issue 7's chat on an H200 (not measured there since session 61).
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
case ${STEP:-tests} in
tests)
  timeout 230 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_model_gpu.py \
    test/test_copyback.py test/test_engine_no_wait_gpu.py > "$OUT/tests.log" 2>&1
  echo "tests rc=$? at $((SECONDS - T0)) s: $(tail -1 "$OUT/tests.log")"
  # (session 66) the copy-back's row clones on more threads, on this host's 16 cores
  timeout 60 python3 docs/experiments/session66/clone_threads.py > "$OUT/clone_threads.log" 2>&1
  echo "clones rc=$?: $(tr '\n' ' ' < "$OUT/clone_threads.log" | cut -c1-600)" ;;
stress)
  [ -d /tmp/old ] || { mkdir /tmp/old && cp -a . /tmp/old/ && \
    (cd /tmp/old && patch -R -p1 -s < docs/experiments/session65/copyback.patch); } || exit 1
  for round in ${ROUNDS:-1 2}; do  # ROUNDS=1, then ROUNDS=2: a call each
    for v in "old /tmp/old 256" "new . 256" "new . 1024"; do
      set -- $v
      echo "=== $1 $3 $round" >> "$OUT/stress.log"
      (cd "$2" && timeout 60 python3 -m server.bench stress --preset 2.9b --tasks 256 \
        --max-tokens 2000 --buffer-size 32 --temperature 1.0 --deadline 50 --state-dtype fp16 \
        --copyback-mb "$3") >> "$OUT/stress.log" 2>&1
      echo "stress $1 $3 rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== $1 $3 $round/,\$p" \
        "$OUT/stress.log" | grep -E 'peak memory|whole-run|copy-back' | tr '\n' ' ' | cut -c1-400)"
    done
  done ;;
memory)
  for mb in 0 1024; do  # (0: as served, 256 since session 66)
    echo "=== copyback $mb" >> "$OUT/memory.log"
    timeout 110 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
      --load 256 --copyback-mb $mb >> "$OUT/memory.log" 2>&1
    echo "memory $mb rc=$? at $((SECONDS - T0)) s: $(sed -n "/=== copyback $mb/,\$p" \
      "$OUT/memory.log" | grep -E '^device in use|after a load' | tr '\n' ' ' | cut -c1-600)"
  done ;;
decode)
  small() { CUBLAS_WORKSPACE_CONFIG=:4096:2 CUBLASLT_WORKSPACE_SIZE=4096 "$@"; }
  plain() { "$@"; }
  for ws in plain small plain small; do
    echo "=== $ws" >> "$OUT/decode.log"
    $ws timeout 60 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 \
      --state-dtype fp16 --pulses 3 >> "$OUT/decode.log" 2>&1
    echo "decode $ws rc=$? at $((SECONDS - T0)) s: $(grep -E '^\| [0-9]' "$OUT/decode.log" \
      | tail -3 | tr '\n' ' ')"
  done ;;
chat)
  grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: the chat is for the H200"; exit 0; }
  timeout 110 python3 -m server.bench.chat --demo 2.9b --repeat 2 --client raw --think \
    > "$OUT/chat.log" 2>&1
  echo "chat rc=$?: $(grep -E 'turns 2\+ of all|last turn' "$OUT/chat.log" | head -2 \
    | tr '\n' ' ')" ;;
*) echo "STEP: tests, stress, memory, decode or chat"; exit 2 ;;
esac
