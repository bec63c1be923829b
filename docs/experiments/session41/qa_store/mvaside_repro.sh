#!/bin/bash
# repro: after a kill -9, moving the .db aside (the server's own advice) loses everything in the -wal
cd /tmp/qa_store; rm -f mv.db* mvold.db*
./srv.sh a 8103 /tmp/qa_store/mv.db; ./wait.sh 8103
for i in 1 2 3; do T=$(curl -s -X POST localhost:8103/v1/tasks/create -H 'Content-Type: application/json' -d '{"prompt":"mv '$i'","max_tokens":0}' | python3 -c 'import json,sys;print(json.load(sys.stdin)["task_id"])'); echo "acked $(curl -s -X POST localhost:8103/v1/tasks/$T/as_template | python3 -c 'import json,sys;print(json.load(sys.stdin)["task_id"])')"; done
sleep 1; kill -9 $(cat port8103.pid); sleep 1; ls -la mv.db*
mv mv.db mvold.db
./srv.sh a 8103 /tmp/qa_store/mv.db; ./wait.sh 8103; grep "Task database" a.log | cut -c1-150; kill $(cat port8103.pid); sleep 3
/work/main/.venv/bin/python -c "
import sqlite3; c=sqlite3.connect('file:/tmp/qa_store/mvold.db?mode=ro',uri=True)
print('tables in the moved-aside file:', c.execute('select name from sqlite_master').fetchall())"
ls -la mv.db-wal
