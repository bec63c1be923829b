# kill -9 right after N acknowledged persistent creates (max_tokens 0), then count how many of
# the acknowledged ids the restarted server has (session 41). From the repo root:
#   bash docs/experiments/session41/qa_store/k9_run.sh 100 0      # N, seconds between the last ack and the kill
N=${1:-100}; DELAY=${2:-0}; D=$(mktemp -d); PORT=8121
start() { RWKV_TASK_DB_PATH=$D/t.db OMP_NUM_THREADS=1 .venv/bin/python run.py --demo tiny --port $PORT > $D/srv$1.log 2>&1 &
  for i in $(seq 90); do curl -s localhost:$PORT/health > /dev/null && break; sleep 1; done; }
start 1; PID=$(pgrep -f "port $PORT" | head -1)
.venv/bin/python docs/experiments/session41/qa_store/k9.py $PORT $N 0 $PID $D/acked.txt $DELAY
sleep 1; rm -f $D/t.db.lock; start 2
kept=0; for t in $(cat $D/acked.txt); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' localhost:$PORT/v1/tasks/$t/status)" = 200 ] && kept=$((kept+1)); done
echo "N=$N delay=${DELAY}s: $kept of $(wc -l < $D/acked.txt) acknowledged tasks found after the restart"
pkill -TERM -f "port $PORT"; sleep 2
