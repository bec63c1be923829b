#!/bin/bash
# usage: stop.sh LOG [SIG]  -> sends SIG (TERM) to pid in LOG.pid, waits for exit
LOG=$1; SIG=${2:-TERM}; PID=$(cat $LOG.pid)
kill -$SIG $PID 2>/dev/null
for i in $(seq 1 60); do kill -0 $PID 2>/dev/null || { echo "stopped pid=$PID sig=$SIG"; exit 0; }; sleep 0.5; done
echo "STILL RUNNING pid=$PID"; exit 1
