#!/usr/bin/env bash
# Session 60, call 2: the embedding table in pinned host memory (6dae200) against the tree
# before it (b248247, `.whl/ab_emb` = `git archive b248247 server run.py few_shot.txt
# eof_v20230424.txt pyproject.toml test`; git-ignored, made before the call):
# 1. served memory, 2.9B, max batch 256, fp16 state, after the start and under a load of 256
#    requests (`server.bench memory --load 256`), new then old;
# 2. speed, new / old / new: decode at batch 1 / 256 / 1,024 (fp16 state) and the prefill
#    of one 4,096-token prompt and of the cached chat turn's 158 tokens;
# 3. the CUDA tests the change touches (the lookup, the forward against the reference).
set -u
OUT=${OUT:-/tmp/out}
NEW=$PWD
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
tree() { case $1 in old*) echo "$NEW/.whl/ab_emb";; *) echo "$NEW";; esac; }
for run in new old; do
  (cd "$(tree $run)" && PYTHONPATH=/tmp/site:. timeout 170 python3 -m server.bench memory \
    --demo 2.9b --max-batch 256 --state-dtype fp16 --load 256) > "$OUT/memory_$run.log" 2>&1
  echo "memory $run rc=$?: $(grep -E 'after the warm-up|^device in use|after a load|at that peak' \
    "$OUT/memory_$run.log" | tr '\n' ' ')"
done
for run in new1 old1 new2; do
  [ $((SECONDS - T0)) -lt 420 ] || { echo "$run: no time left"; break; }
  (cd "$(tree $run)" && PYTHONPATH=/tmp/site:. timeout 60 python3 -m server.bench decode \
    --preset 2.9b --batch 1,256,1024 --state-dtype fp16 --pulses 3) > "$OUT/decode_$run.log" 2>&1
  echo "decode $run rc=$?"; grep -E "^\|" "$OUT/decode_$run.log"
  (cd "$(tree $run)" && PYTHONPATH=/tmp/site:. timeout 60 python3 -m server.bench prefill \
    --preset 2.9b --cases 1x4096,1x158 --scheduler 0 --repeat 5) > "$OUT/prefill_$run.log" 2>&1
  echo "prefill $run rc=$?"; grep -E "^\|" "$OUT/prefill_$run.log"
done
left=$((570 - (SECONDS - T0)))
[ $left -gt 30 ] && timeout $left python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider \
  test/test_embedding.py test/test_model_gpu.py test/test_split_invariance_gpu.py \
  -k "not every_preset" > "$OUT/tests.log" 2>&1
echo "tests rc=$? (${left}s): $(tail -1 "$OUT/tests.log")"
