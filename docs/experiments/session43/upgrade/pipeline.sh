#!/bin/bash
# pipeline.sh TREE PORT  -- old tree populates term.db (SIGTERM) and k9/term.db (kill -9); new tree opens them
T=$1; PORT=$2
U=/tmp/qa43/upgrade; B=$U/bin; PY=$U/new_head/.venv/bin/python
D=$U/data/$T; K=$D/k9; mkdir -p $D $K
cp_db() { for e in "" -wal -shm; do [ -e $1$e ] && cp $1$e $2$e; done; true; }
echo "### [$T] old phase, SIGTERM"
[ -e $D/old.json ] || { $B/srv.sh $T $D/term.db $PORT $D/old_term.log && $PY $B/qa.py old http://127.0.0.1:$PORT $D >$D/old_phase.out 2>&1; echo "old phase rc=$?"; $B/stop.sh $D/old_term.log; }
echo "### [$T] old phase, kill -9"
$B/srv.sh $T $K/term.db $PORT $K/old_k9.log && $PY $B/qa.py old http://127.0.0.1:$PORT $K >$K/old_phase.out 2>&1; echo "old phase rc=$?"
cp $K/T_fin.state $K/T_fin.state.bak
$PY $B/qa.py k9 http://127.0.0.1:$PORT $K >$K/k9.out 2>&1; $B/stop.sh $K/old_k9.log KILL
ls -la $K/term.db*
for X in $D $K; do
  echo "### [$T] $X: backups and rows before"
  mkdir -p $X/bak; cp_db $X/term.db $X/bak/term.db; $PY $B/rows.py $X/term.db $X/rows_before.json > $X/rows_before.txt; head -1 $X/rows_before.txt
  echo "### [$T] $X: new tree read-only probe on a copy"
  cp_db $X/term.db $X/probe.db
  $B/srv.sh new_head $X/probe.db $PORT $X/new_probe.log && $PY $B/qa.py probe http://127.0.0.1:$PORT $X/probe >$X/probe.out 2>&1; head -3 $X/probe.out; $B/stop.sh $X/new_probe.log
  $PY $B/rows.py $X/probe.db $X/rows_after_probe.json | head -1 || true
  $PY - $X <<'PYEOF'
import json,sys
x=sys.argv[1]; a=json.load(open(x+'/rows_before.json')); b=json.load(open(x+'/rows_after_probe.json'))
ch=[t for t in a['rows'] if t not in b['rows'] or any(a['rows'][t][k]!=b['rows'][t][k] for k in ('meta','blob','tpl'))]
new=[t for t in b['rows'] if t not in a['rows']]
print('probe: rows changed/lost:',ch,' added:',new, ' uv', a['user_version'],'->',b['user_version'])
PYEOF
  echo "### [$T] $X: new phase (full) on the file"
  $B/srv.sh new_head $X/term.db $PORT $X/new_full.log && $PY $B/qa.py new http://127.0.0.1:$PORT $X/new $X >$X/new_phase.out 2>&1; cat $X/new_phase.out | cut -c1-400; $B/stop.sh $X/new_full.log
  grep -c "ERROR\|Traceback" $X/new_full.log
  $PY $B/rows.py $X/term.db $X/rows_after_new.json | head -1 || true
done
echo "### [$T] k9: acknowledged writes present after kill -9?"
$PY - $K <<'PYEOF'
import json,sys
k=sys.argv[1]; R=json.load(open(k+'/k9.json')); rows=json.load(open(k+'/rows_before.json'))['rows']
want=[t for t,_ in R['creates']]+[R['k9_tpl'][1],'_k9imp',R['k9_running']]
print('k9 acks:', {t: (t in rows) for t in want})
PYEOF
