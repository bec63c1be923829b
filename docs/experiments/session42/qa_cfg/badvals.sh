#!/bin/bash
cd /work/main
try() {
  local out rc
  out=$(env OMP_NUM_THREADS=1 RWKV_TASK_DB_PATH=/tmp/qa42_cfg/db_bad.db "$@" timeout 40 uv run python run.py --demo tiny --port 8431 --host 127.0.0.1 2>&1)
  rc=$?
  echo "[$rc] $* :: $(echo "$out" | grep -v "^Invalid configuration" | grep -iE "RWKV_|error|Traceback" | head -3 | cut -c1-230 | tr '\n' '|')"
}
for v in 0 -1 "" abc 1.5 65537; do try RWKV_MAX_BATCH_SIZE=$v; done
for v in 0 -1 "" 4097; do try RWKV_BUFFER_SIZE=$v; done
for v in -1 "" 1.5; do try RWKV_STATE_CACHE_MB=$v; done
for v in "" maybe 2; do try RWKV_SPLIT_INVARIANT=$v; done
for v in "" fp8 FP16; do try RWKV_STATE_DTYPE=$v; done
for v in "" bf32 BF16; do try RWKV_DTYPE=$v; done
for v in 31 1 -1 -32 ""; do try RWKV_PREFILL_CHUNK=$v; done
for v in 0 -1 ""; do try RWKV_MAX_QUEUE=$v; done
for v in 0 -1 ""; do try RWKV_TASK_DB_MAX_SIZE=$v; done
for v in -1 ""; do try RWKV_MAX_TOKENS_CAP=$v; done
for v in -1 ""; do try RWKV_DEFAULT_MAX_TOKENS=$v; done
for v in 0 -1 ""; do try RWKV_MAX_PROMPT_TOKENS=$v; done
for v in "" " k"; do try RWKV_API_KEY="$v"; done
for v in "" maybe; do try RWKV_CHAT_THINK=$v; done
for v in "" 2; do try RWKV_CHAT_WARM_NEXT_TURN=$v; done
for v in -1 ""; do try RWKV_ADMIT_WAIT_STEPS=$v; done
try RWKV_MAX_BATCH_SIZE=0 RWKV_BUFFER_SIZE=0 RWKV_MAX_QUEUE=-1
