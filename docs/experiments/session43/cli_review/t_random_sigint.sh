#!/bin/bash
# SIGINT the moment the .part file appears: no OUT, no .part left, exit status
cd /tmp/qa43/review2/repo
W=/tmp/qa43/review2/rnd4; rm -rf $W; mkdir -p $W
PYTHONPATH=. .venv/bin/python -m server.model.random $W/big.pth --preset 0.4b --dtype fp32 & P=$!
while ! ls -a $W | grep -q part; do sleep 0.02; done; sleep 0.2; ls -la $W; kill -INT $P; wait $P; echo rc=$?
ls -la $W
