#!/usr/bin/env bash
# Session 62, call 3 (if device time is left): RWKV_PREFILL_TOKENS' cost and memory at 2,048 and
# 4,096 against 16,384 (HEAD), and the base's prefill again (new / old / new with call 2).
set -u
OUT=${OUT:-/tmp/out}
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
pf() {  # name, directory, tokens
  echo "=== $1" >> "$OUT/prefill.log"
  (cd "$2" && timeout 100 python3 -m server.bench prefill --preset 2.9b \
    --cases 64x512,16x1024,1x4096 --scheduler 0 --repeat 3 --state-dtype fp16 \
    --prefill-tokens $3 >> "$OUT/prefill.log" 2>&1)
  echo "prefill $1 rc=$? at $((SECONDS - T0)) s"
  sed -n "/=== $1/,\$p" "$OUT/prefill.log" | grep -E "^\| [0-9]"
}
pf new16384b . 16384
pf new4096 . 4096
pf new2048 . 2048
echo "=== new2048" >> "$OUT/memory.log"
timeout 150 python3 -m server.bench memory --demo 2.9b --max-batch 256 --state-dtype fp16 \
  --load 256 --prefill-tokens 2048 >> "$OUT/memory.log" 2>&1
echo "memory new2048 rc=$?: $(grep -E 'after the warm-up:|^device in use|after a load|at that peak|^stack limit|^Triton kernels' \
  "$OUT/memory.log" | tr '\n' ' ' | cut -c1-900)"
