#!/bin/bash
# repro: two servers on one SQLite file through a hard link
cd /tmp/qa_store
mk() { T=$(curl -s -X POST localhost:$1/v1/tasks/create -H 'Content-Type: application/json' -d '{"prompt":"User: '$2'\n\nAssistant:","max_tokens":0}' | python3 -c 'import json,sys;print(json.load(sys.stdin)["task_id"])'); curl -s -X POST localhost:$1/v1/tasks/$T/as_template | python3 -c 'import json,sys;print(json.load(sys.stdin)["task_id"])'; }
./srv.sh a 8103 /tmp/qa_store/h.db; ./wait.sh 8103
echo "template on A: $(mk 8103 a)"
ln h.db h2.db
./srv.sh b 8104 /tmp/qa_store/h2.db; ./wait.sh 8104; echo "B started: $(grep -c 'Application startup complete' b.log)"
echo "template on B: $(mk 8104 b)"
kill $(cat port8103.pid); sleep 4; kill $(cat port8104.pid); sleep 4
./srv.sh a 8103 /tmp/qa_store/h.db; ./wait.sh 8103
echo "after restart on h.db, templates:"; curl -s localhost:8103/v1/models | grep -o '_TMPL_[0-9a-f]*'
kill $(cat port8103.pid); sleep 3
