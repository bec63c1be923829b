#!/usr/bin/env bash
# Garbage collections in a served tiny model's process (CPU) under N chat requests from 4
# threads (distinct 200-word prompts, 16 tokens each), at generation-0 threshold G:
#   bash docs/experiments/session39/gc_load.sh G N     (from the repository root; port 18901)
set -u
G=$1; N=$2; D=/tmp/gc-load-$G; rm -rf "$D"; mkdir -p "$D"
HERE=$(cd "$(dirname "$0")" && pwd)
GC_LOG_DIR=$D GC0=$G RWKV_GC_THRESHOLD=$G OMP_NUM_THREADS=1 RWKV_TASK_DB_PATH=$D/t.db \
  PYTHONPATH="$HERE/gcsite" uv run python run.py --demo tiny --port 18901 >"$D/server.log" 2>&1 &
P=$!
for i in $(seq 120); do curl -sf localhost:18901/health >/dev/null && break; sleep 1; done
t0=$(date +%s.%N)
uv run python "$HERE/load_client.py" http://127.0.0.1:18901 "$N"
t1=$(date +%s.%N)
kill -TERM $P; wait $P
echo "generation-0 threshold $G, $N requests in $(python3 -c "print(round($t1 - $t0, 1))") s:"
python3 "$HERE/gc_summary.py" "$D" "$t0" "$t1"
