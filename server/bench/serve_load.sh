#!/usr/bin/env bash
# Served throughput over HTTP: a server (`run.py --demo PRESET`, random weights) and many
# concurrent streamed requests from test/batch_async.py, the seed's concurrency script.
#   bash server/bench/serve_load.sh                       # 2.9b, 256 streams of 1,000 tokens
#   PRESET=0.1b PROCS=4 CONC=64 N=64 API=openai bash server/bench/serve_load.sh
# Settings: PRESET, PORT, PROCS client processes (each a Python process with CONC requests in
# flight, N requests in all), MAX_TOKENS, API (tasks or openai); the server's RWKV_* settings come
# from the environment (e.g. RWKV_STATE_DTYPE=fp16, RWKV_GIL_SWITCH_US=5000). The port must be
# free (a server already there is not measured); stopping the script stops what it started.
# Prints each client's report (its whole run: ramp and tail included), the GPU's utilization
# over the run (nvidia-smi, where there is one), the server's device memory after the load
# (/health's device_memory, on CUDA) and the server's once-a-second pulse lines
# (`speed`: tokens over the pulse's own time, at steady load).
set -u
PRESET=${PRESET:-2.9b} PORT=${PORT:-8000} PROCS=${PROCS:-1} CONC=${CONC:-256} N=${N:-256}
MAX_TOKENS=${MAX_TOKENS:-1000} API=${API:-tasks}
OUT=${OUT:-/tmp/serve-load}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 RWKV_TASK_DB_PATH=${RWKV_TASK_DB_PATH:-$OUT/tasks.db}
cd "$(dirname "$0")/../.."
LOG="$OUT/server-$PRESET-$PORT.log"
if python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1).close()" \
    2>/dev/null; then
  echo "port $PORT is in use: stop what serves there or give another PORT"; exit 1
fi
SERVER="" SMI="" clients=()
trap 'kill ${SERVER:+$SERVER} ${SMI:+$SMI} ${clients[@]+"${clients[@]}"} 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
python3 run.py --demo "$PRESET" --port "$PORT" >"$LOG" 2>&1 &
SERVER=$!
URL=http://127.0.0.1:$PORT
up=0
for _ in $(seq 1 300); do
  kill -0 $SERVER 2>/dev/null || break  # (its own server, not another on the port)
  if python3 -c "import httpx, sys; sys.exit(httpx.get('$URL/health').status_code != 200)" \
      2>/dev/null; then up=1; break; fi
  sleep 1
done
if [ $up != 1 ] || ! kill -0 $SERVER 2>/dev/null; then
  echo "server did not come up; see $LOG"; tail -5 "$LOG"; exit 1
fi
echo "# serve_load: $PRESET, $PROCS x $CONC streams ($N requests each) of $MAX_TOKENS tokens," \
  "$API API; $(date -u +%T)"
python3 test/batch_async.py --url "$URL" --n 8 --concurrency 8 --max-tokens 64 --api "$API" \
  >/dev/null 2>&1  # the first requests' one-time costs, outside the timed run
from=$(wc -l <"$LOG")
if command -v nvidia-smi >/dev/null; then  # the GPU's busy share, sampled every 100 ms
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 \
    >"$OUT/util.txt" 2>/dev/null &
  SMI=$!
fi
for p in $(seq 1 "$PROCS"); do
  python3 test/batch_async.py --url "$URL" --n "$N" --concurrency "$CONC" \
    --max-tokens "$MAX_TOKENS" --api "$API" >"$OUT/client-$p.log" 2>&1 &
  clients+=($!)
done
wait "${clients[@]}"
if [ -n "$SMI" ]; then
  kill $SMI
  SMI=""
  python3 -c "
v = [int(x) for x in open('$OUT/util.txt').read().split() if x.isdigit()]
busy = sorted(v)
print(f'GPU utilization (nvidia-smi, every 100 ms, {len(v)} samples): mean {sum(v) / len(v):.0f} %,'
      f' median {busy[len(v) // 2]} %, samples below 90 %: {sum(x < 90 for x in v)}')"
fi
for p in $(seq 1 "$PROCS"); do
  grep -hE "requests|total time|throughput|TTFT|error" "$OUT/client-$p.log"
done
python3 -c "
import httpx
m = httpx.get('$URL/health').json().get('device_memory')
if m:  # (CUDA) the process's device memory after the load; peak_allocated: the most in tensors
    print('device memory after the load: ' + ', '.join(f'{k} {v / 2**30:.2f} GiB'
                                                       for k, v in m.items()))" 2>/dev/null
echo "## server pulses during the run"
tail -n +"$from" "$LOG" | grep -E "Iter .*speed" | sed -E 's/.*(Iter .*)/\1/'
kill -INT $SERVER
wait $SERVER
SERVER=""
