#!/bin/bash
# repro: a row SQLite reports as malformed cannot be deleted through the API (SQLite itself can delete it)
cd /tmp/qa_store; rm -f dmg.db* dmg_copy.db
./srv.sh a 8103 /tmp/qa_store/dmg.db; ./wait.sh 8103
for i in $(seq 1 30); do T=$(curl -s -X POST localhost:8103/v1/tasks/create -H 'Content-Type: application/json' -d '{"prompt":"d '$i'","max_tokens":0}' | python3 -c 'import json,sys;print(json.load(sys.stdin)["task_id"])'); curl -s -X POST localhost:8103/v1/tasks/$T/as_template >/dev/null; done
kill $(cat port8103.pid); sleep 4
/work/main/.venv/bin/python - <<'PY'
import os, sqlite3
p='/tmp/qa_store/dmg.db'; n=sqlite3.connect(p).execute('pragma page_count').fetchone()[0]
f=open(p,'r+b'); f.seek(4096*(n//2)); f.write(os.urandom(4096*4)); f.close(); print('overwrote pages', n//2, '..', n//2+3, 'of', n)
PY
cp dmg.db dmg_copy.db
./srv.sh a 8103 /tmp/qa_store/dmg.db; ./wait.sh 8103; grep "Task database" a.log | cut -c1-140
for t in $(/work/main/.venv/bin/python -c "import sqlite3;print(' '.join(r[0] for r in sqlite3.connect('file:/tmp/qa_store/dmg_copy.db?mode=ro',uri=True).execute('select task_id from tasks where is_template=1')))"); do
  c=$(curl -s -o /dev/null -w '%{http_code}' localhost:8103/v1/tasks/$t/status)
  if [ "$c" != 200 ]; then echo "status $t -> $c"; echo "delete?force=true -> $(curl -s -X POST "localhost:8103/v1/tasks/$t/delete?force=true" -w ' [%{http_code}]' | cut -c1-400)"; BAD=$t; fi
done
echo "health: $(curl -s localhost:8103/health | head -c 120)"
kill $(cat port8103.pid); sleep 3
/work/main/.venv/bin/python -c "
import sqlite3; c=sqlite3.connect('/tmp/qa_store/dmg_copy.db'); print('sqlite3 DELETE rowcount', c.execute(\"delete from tasks where task_id='$BAD'\").rowcount); c.commit(); print(c.execute('pragma integrity_check').fetchone())"
