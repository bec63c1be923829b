#!/usr/bin/env bash
# Written in session 60 for the next GPU session (not run). About 7-8 minutes; any card (the
# figures are A/Bs on one machine). At most 8 files come back: logs are grouped.
# 1. The allocator's expandable segments, off / on / off: decode at batch 1 / 256 / 1,024 (fp16
#    state) and prefill (64 x 512, 1 x 4,096) through the engine. Session 60 measured their
#    memory (11.20 vs 12.65 GiB on the device after a load of 256 requests) but not their
#    speed: the default waits on this.
# 2. The embedding table in pinned host memory (HEAD) against the tree before it (b248247,
#    `.whl/ab_emb`: `git archive b248247 server run.py few_shot.txt eof_v20230424.txt
#    pyproject.toml test`, git-ignored: make it before the call) on the batched prefill that
#    session 60 did not A/B-time (64 x 512, 16 x 1,024), new / old / new.
set -u
OUT=${OUT:-/tmp/out}
NEW=$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
for run in off1 on1 off2 on2; do
  conf=""; case $run in on*) conf=expandable_segments:True;; esac
  echo "=== $run" | tee -a "$OUT/decode.log" >> "$OUT/prefill.log"
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 60 python3 -m server.bench decode --preset 2.9b \
    --batch 1,256,1024 --state-dtype fp16 --pulses 3 >> "$OUT/decode.log" 2>&1
  echo "decode $run rc=$?"; sed -n "/=== $run/,\$p" "$OUT/decode.log" | grep -E "^\| [0-9]"
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 60 python3 -m server.bench prefill --preset 2.9b \
    --cases 64x512,1x4096 --scheduler 0 --repeat 3 --state-dtype fp16 >> "$OUT/prefill.log" 2>&1
  echo "prefill $run rc=$?"; sed -n "/=== $run/,\$p" "$OUT/prefill.log" | grep -E "^\| [0-9]"
done
if [ -d .whl/ab_emb/server ]; then
  for run in new1 old1 new2; do
    dir=$NEW; case $run in old*) dir=$NEW/.whl/ab_emb;; esac
    echo "=== $run" >> "$OUT/emb.log"
    (cd "$dir" && PYTHONPATH=/tmp/site:. timeout 60 python3 -m server.bench prefill \
      --preset 2.9b --cases 64x512,16x1024 --scheduler 0 --repeat 3 --state-dtype fp16) \
      >> "$OUT/emb.log" 2>&1
    echo "emb $run rc=$?"; sed -n "/=== $run/,\$p" "$OUT/emb.log" | grep -E "^\| [0-9]"
  done
else
  echo "no .whl/ab_emb: the embedding A/B not run"
fi
# 3. The CUDA test of the review fixes (0cdc1d8: a strided slice of ids; not run in session 60)
timeout 120 python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_embedding.py \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(tail -1 "$OUT/tests.log")"
