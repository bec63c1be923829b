#!/bin/bash
# $1 = seconds before SIGINT, rest = run.py args
d=$1; shift
cd /tmp/qa43/cli/repo
RWKV_TASK_DB_PATH=/tmp/qa43/cli/w/sig.db .venv/bin/python run.py "$@" > /tmp/qa43/cli/w/sig_run.log 2>&1 &
p=$!
sleep $d; kill -INT $p; wait $p; echo "rc=$?"
tail -4 /tmp/qa43/cli/w/sig_run.log
