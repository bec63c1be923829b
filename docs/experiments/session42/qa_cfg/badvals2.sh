#!/bin/bash
cd /work/main
try() {
  local out rc
  out=$(env OMP_NUM_THREADS=1 RWKV_TASK_DB_PATH=/tmp/qa42_cfg/db_bad.db "$@" timeout 25 uv run python run.py --demo tiny --port 8431 --host 127.0.0.1 2>&1)
  rc=$?
  echo "[$rc] $(printf '%q ' "$@") :: $(echo "$out" | grep -v "^Invalid configuration" | grep -E "RWKV_|rror|Traceback|max_batch|Uvicorn running" | grep -v "No API key\|DEMO MODE\|computes bf16" | head -3 | cut -c1-200 | tr '\n' '|')"
}
try rwkv_max_batch_size=0
try RWKV_MAX_BATCH_SIZE=" 4"
try RWKV_MAX_BATCH_SIZE="4_096"
try RWKV_MAX_BATCH_SIZE="1e3"
try RWKV_STATE_DTYPE="fp16 "
try RWKV_CHAT_THINK=yes
try RWKV_CHAT_THINK=off
try RWKV_PREFILL_CHUNK=AUTO
try RWKV_PREFILL_CHUNK=" auto "
try RWKV_STATE_CACHE_MB=0 RWKV_CHAT_WARM_NEXT_TURN=true
try RWKV_DEFAULT_MAX_TOKENS=50000 RWKV_MAX_TOKENS_CAP=100
