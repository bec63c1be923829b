#!/bin/bash
# reverse.sh PORT -- DB written by the new tree, opened by each old tree, then by the new tree again
PORT=$1; U=/tmp/qa43/upgrade; B=$U/bin; PY=$U/new_head/.venv/bin/python
R=$U/data/reverse; mkdir -p $R
cp_db() { for e in "" -wal -shm; do [ -e $1$e ] && cp $1$e $2$e; done; true; }
if [ ! -e $R/old.json ]; then
  echo "### new tree populates a fresh DB (same script as the old phase)"
  $B/srv.sh new_head $R/new.db $PORT $R/new_pop.log && $PY $B/qa.py old http://127.0.0.1:$PORT $R > $R/pop.out 2>&1; echo "pop rc=$?"
  # a FIM persistent-less check: a fim task (stop_at_turn false) made persistent? (fim is tmp) -- skip
  $B/stop.sh $R/new_pop.log
fi
$PY $B/rows.py $R/new.db $R/rows_new.json > $R/rows_new.txt; head -1 $R/rows_new.txt
for T in "$@"; do
  [ "$T" = "$PORT" ] && continue
  X=$R/$T; mkdir -p $X; rm -f $X/db*; cp_db $R/new.db $X/db
  echo "### $T opens the new tree's DB"
  $B/srv.sh $T $X/db $PORT $X/old_open.log; grep -i "error\|refus\|version" $X/old_open.log | head -5
  $PY $B/qa.py probe http://127.0.0.1:$PORT $X/probe_old > $X/probe_old.out 2>&1; head -1 $X/probe_old.out; grep -v " 200 " $X/probe_old.out | grep "^GET\|^FORK" | head
  # compare forks with the new tree's forks of the same templates
  $PY - $R $X <<'PYEOF'
import json,sys
r,x=sys.argv[1:]; O=json.load(open(r+'/old.json')); P=json.load(open(x+'/probe_old/probe.json'))
for t in O['tpls']:
    a=O['forks'][t]['greedy'].get('result'); b=P['fork'].get(t,{}).get('result')
    print('  fork', t, 'SAME' if a==b else f'DIFF new={a!r} old={b!r}')
for k in ('T_fin','T_stop'):
    t=O[k]['task_id']; print('  get', k, 'SAME' if P['get'].get(t,[0,None])[1]==O[k].get('result') else f"DIFF {P['get'].get(t)}")
PYEOF
  # a write by the old tree: continue a new-tree task, make a template
  $PY - $PORT $R <<'PYEOF'
import json,sys,httpx,time
port,r=sys.argv[1:]; O=json.load(open(r+'/old.json')); c=httpx.Client(base_url=f'http://127.0.0.1:{port}',timeout=60)
t=O['T_cont']['task_id']; s=c.post(f'/v1/tasks/{t}/continue',json={'prompt':'\n\nUser: And of Germany?\n\nAssistant:','max_tokens':20,'temperature':0})
print('  old continue of new T_cont:', s.status_code)
for i in range(200):
    j=c.get(f'/v1/tasks/{t}/get_result').json()
    if j.get('finished'): break
    time.sleep(0.1)
print('  same as new fork(T_fin,P5):', j.get('result')==O['fork_fin_P5'].get('result'))
s=c.post(f"/v1/tasks/{O['T_stop']['task_id']}/as_template"); print('  old as_template of new T_stop:', s.status_code, s.text[:100])
PYEOF
  $B/stop.sh $X/old_open.log
  $PY $B/rows.py $X/db $X/rows_after_old.json > $X/rows_after_old.txt; head -1 $X/rows_after_old.txt
  $PY - $R $X <<'PYEOF'
import json,sys
r,x=sys.argv[1:]; a=json.load(open(r+'/rows_new.json')); b=json.load(open(x+'/rows_after_old.json'))
for t in a['rows']:
    if t not in b['rows']: print('  LOST', t); continue
    A,B=a['rows'][t],b['rows'][t]
    if A['meta']!=B['meta'] or A['blob']!=B['blob']:
        print('  CHANGED', t, 'keys lost:', sorted(set(A['keys'])-set(B['keys'])), 'blob', A['blen'],'->',B['blen'])
print('  added:', [t for t in b['rows'] if t not in a['rows']])
PYEOF
  echo "### new tree reopens the DB after $T"
  $B/srv.sh new_head $X/db $PORT $X/new_reopen.log && $PY $B/qa.py probe http://127.0.0.1:$PORT $X/probe_new > $X/probe_new.out 2>&1; head -1 $X/probe_new.out; grep -v " 200 " $X/probe_new.out | grep "^GET\|^FORK" | head
  $B/stop.sh $X/new_reopen.log; grep -c "ERROR\|Traceback" $X/new_reopen.log
done
