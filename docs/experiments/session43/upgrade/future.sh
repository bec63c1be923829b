#!/bin/bash
# future.sh -- a DB stamped user_version=2 (as a future schema would be) opened by each tree
U=/tmp/qa43/upgrade; B=$U/bin; PY=$U/new_head/.venv/bin/python; F=$U/data/future
for T in new_head old_4913d6a old_31c239b old_e366bef old_dff5f9b; do
  rm -f $F/$T.db*; cp $U/data/reverse/new.db $F/$T.db
  $PY -c "import sqlite3;d=sqlite3.connect('$F/$T.db');d.execute('PRAGMA user_version=2');d.commit();d.close()"
  sha_before=$(sha256sum $F/$T.db | cut -c1-12)
  echo "### $T on user_version=2"
  $B/srv.sh $T $F/$T.db 18103 $F/$T.log; grep -i "version\|error" $F/$T.log | grep -v "INFO    | api  *| 127" | head -4 | cut -c1-400
  [ -e $F/$T.log.pid ] && kill -0 $(cat $F/$T.log.pid) 2>/dev/null && { curl -s 127.0.0.1:18103/v1/tasks/list | cut -c1-150; echo; $B/stop.sh $F/$T.log; }
  $PY -c "import sqlite3;d=sqlite3.connect('$F/$T.db');print('user_version after:',d.execute('PRAGMA user_version').fetchone()[0])"
  echo "sha before $sha_before after $(sha256sum $F/$T.db | cut -c1-12)"
done
