#!/usr/bin/env bash
# Session 57, GPU call 2 (any card): the pulse that hands out a request's first token, alone, at
# 2.9B (`server.bench pulse`: capacity 1, a 158-token prompt, the device synchronised before the
# pulse, then each way once under torch.profiler): where its host time goes.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
timeout 300 python3 -m server.bench pulse --preset 2.9b --prompt 158 --repeat 20 --profile \
  > "$OUT/pulse.log" 2>&1
echo "pulse rc=$?"
grep -A3 "^| first token" "$OUT/pulse.log"
