#!/usr/bin/env bash
# Session 59, call 4: a served process's GPU memory after its start (warm-up: every decode and
# prefill graph captured, the throwaway requests), 2.9B random weights, RWKV_MAX_BATCH_SIZE=256,
# fp16 state: HEAD (one warm-up stream) against cf2c0f8 (a new stream per capture; .whl/ab_prev
# = `git archive cf2c0f8`), HEAD again. nvidia-smi's memory.used with the server the GPU's only process: all told.
# (call 6: /health's device_memory read too, where the tree has it; TREES picks the trees)
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
root=$PWD
for tree in . .whl/ab_prev .; do
  cd "$root/$tree"
  RWKV_MAX_BATCH_SIZE=256 RWKV_STATE_DTYPE=fp16 RWKV_TASK_DB_PATH=/tmp/mem$$.db \
    PYTHONPATH=/tmp/site:. python3 run.py --demo 2.9b --port 8799 > "$OUT/server_${tree//[.\/]/_}.log" 2>&1 &
  pid=$!
  for _ in $(seq 240); do
    python3 -c "import httpx,sys; sys.exit(httpx.get('http://127.0.0.1:8799/health').status_code != 200)" 2>/dev/null && break
    sleep 0.5
  done
  used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader)
  python3 -c "import httpx; print('health device_memory:', httpx.get('http://127.0.0.1:8799/health').json().get('device_memory'))" >> "$OUT/memory.log" 2>&1
  echo "tree $tree: GPU memory used after the start (the only process): $used; $(grep -o 'Warm-up:.*' "$OUT/server_${tree//[.\/]/_}.log" | head -1)" | tee -a "$OUT/memory.log"
  kill -TERM $pid; wait $pid 2>/dev/null
  rm -f /tmp/mem$$.db*
done
