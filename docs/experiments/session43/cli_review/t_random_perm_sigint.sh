#!/bin/bash
# non-root unwritable dir / unwritable existing OUT; SIGINT during save leaves no OUT and no .part
cd /tmp/qa43/review2/repo
W=/tmp/qa43/review2/rnd2; rm -rf $W; mkdir -p $W/ro; chmod 755 $W $W/ro; chmod 777 $W
PY="/tmp/qa43/review2/repo/.venv/bin/python"
NB="setpriv --reuid=65534 --regid=65534 --clear-groups env PYTHONPATH=/tmp/qa43/review2/repo HOME=/tmp"
echo "== nobody: dir not writable"; $NB $PY -m server.model.random $W/ro/x.pth --preset tiny; echo rc=$?
echo "== nobody: existing OUT in writable dir but OUT owned by root 644, --force"
$PY -m server.model.random $W/own.pth --preset tiny >/dev/null; $NB $PY -m server.model.random $W/own.pth --preset tiny --force; echo rc=$?; ls -la $W/own.pth
echo "== nobody: OUT writable file (666) in a read-only dir, --force (plain torch.save would have succeeded)"
cp $W/own.pth $W/ro/w.pth; chmod 666 $W/ro/w.pth; $NB $PY -m server.model.random $W/ro/w.pth --preset tiny --force; echo rc=$?
echo "== SIGINT mid-save (0.4b)"
( $PY -m server.model.random $W/big.pth --preset 0.4b --dtype fp32 & P=$!; 
  for i in $(seq 1 200); do sleep 0.1; ls -a $W | grep -q part && break; done; sleep 0.3; kill -INT $P; wait $P; echo rc=$? )
ls -la $W | grep -v "^d"
echo "== load renamed tiny file via checkpoint loader"
$PY -m server.model.random $W/t.pth --preset tiny >/dev/null
$PY -c "from server.model.checkpoint import load_checkpoint as l; sd,cfg=l('$W/t.pth')[:2]; print(type(sd), cfg)" 2>&1 | tail -2
