#!/bin/bash
U=/tmp/qa43/upgrade; B=$U/bin; PY=$U/new_head/.venv/bin/python; M=$U/data/k9mid; mkdir -p $M
for T in "$@"; do
  rm -f $M/$T.db*; for e in "" -wal -shm; do [ -e $U/data/$T/bak/term.db$e ] && cp $U/data/$T/bak/term.db$e $M/$T.db$e; done
  echo "### $T: kill -9 during concurrent imports/creates"
  BS=4 $B/srv.sh $T $M/$T.db 18104 $M/$T.old.log && $PY $B/k9mid.py http://127.0.0.1:18104 $U/data/$T/T_fin.state $M/$T.old.log.pid $M/$T.acks.json
  sleep 1; ls -la $M/$T.db* | awk '{print $5, $9}'
  cp $M/$T.db $M/$T.db.before_new; [ -e $M/$T.db-wal ] && cp $M/$T.db-wal $M/$T.db.before_new-wal
  $PY $B/rows.py $M/$T.db $M/$T.rows.json > /dev/null; head -c 120 <($PY $B/rows.py $M/$T.db); echo
  $B/srv.sh new_head $M/$T.db 18104 $M/$T.new.log && $PY $B/qa.py probe http://127.0.0.1:18104 $M/$T.probe > $M/$T.probe.out 2>&1; head -1 $M/$T.probe.out | cut -c1-120; grep -v " 200 " $M/$T.probe.out | grep "^GET\|^FORK" | head -5
  $B/stop.sh $M/$T.new.log; grep -c "ERROR\|Traceback" $M/$T.new.log
  $PY - $M $T <<'PYEOF'
import json,sys
m,t=sys.argv[1:]; A=json.load(open(f'{m}/{t}.acks.json')); P=json.load(open(f'{m}/{t}.probe/probe.json'))
ids=set(P['list']['db_tasks'])
lost_imp=[x for x in A['imports'] if x not in ids]; lost_fin=[x for x in A['finished'] if x not in ids]
print(f'  acked imports lost: {len(lost_imp)}/{len(A["imports"])} {lost_imp[:3]}; finished creates lost: {len(lost_fin)}/{len(A["finished"])}; unfinished acked creates present: {len([x for x in A["creates"] if x in ids and x not in A["finished"]])}/{len(A["creates"])-len(A["finished"])}')
bad=[k for k,v in P['get'].items() if v[0]!=200]+[k for k,v in P['fork'].items() if 'http' in v]
print('  rows not served:', bad[:5], 'health', P['health'].get('status'), P['health'].get('task_store'))
PYEOF
done
