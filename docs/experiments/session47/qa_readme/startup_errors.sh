#!/bin/bash
# each case: env + args; expect exit 2 with a message naming the problem
cd /tmp/qa_readme/repo
D=/tmp/qa_readme/db
c() { local name="$1"; shift; echo "=== $name"; rm -f $D/se.db*; ( env RWKV_TASK_DB_PATH=$D/se.db "$@" timeout 40 uv run python run.py 2>&1 | grep -v "^\s*$" | tail -4 | cut -c1-300; echo "rc=${PIPESTATUS[0]}" ); }
c "bad ints" RWKV_MAX_BATCH_SIZE=abc RWKV_BUFFER_SIZE=-1 RWKV_DEMO=tiny
c "empty api key" RWKV_API_KEY= RWKV_DEMO=tiny
c "empty host" RWKV_HOST= RWKV_DEMO=tiny
c "demo+model env" RWKV_DEMO=tiny RWKV_MODEL_PATH=tiny.pth
c "missing model" RWKV_MODEL_PATH=/nonexistent.pth
c "default model path (no checkpoint)" 
c "truncated model" RWKV_MODEL_PATH=/tmp/qa_readme/v_trunc.pth
c "flipped model (loads?)" RWKV_MODEL_PATH=/tmp/qa_readme/v_flip.pth RWKV_PORT=8109
c "bad demo preset" RWKV_DEMO=huge
c "port in use" RWKV_DEMO=tiny RWKV_PORT=8101
c "bad dtype" RWKV_DEMO=tiny RWKV_DTYPE=fp8
c "bad device" RWKV_DEMO=tiny RWKV_DEVICE=cuda
c "bad verbose bool" RWKV_DEMO=tiny RWKV_VERBOSE=maybe
c "db is another program's" RWKV_DEMO=tiny RWKV_TASK_DB_PATH=/tmp/qa_readme/other.db
c "vocab missing" RWKV_DEMO=tiny RWKV_VOCAB_PATH=/nonexistent.txt
c "db in a missing dir" RWKV_DEMO=tiny RWKV_TASK_DB_PATH=/nonexistent/dir/x.db
c "prefill chunk too small" RWKV_DEMO=tiny RWKV_PREFILL_CHUNK=16
c "max tokens cap 0" RWKV_DEMO=tiny RWKV_MAX_TOKENS_CAP=0
