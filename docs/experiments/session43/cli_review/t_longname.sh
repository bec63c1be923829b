#!/bin/bash
# an OUT name of 250 bytes (legal, <= 255) whose temporary name exceeds NAME_MAX
cd /tmp/qa43/review2/repo; W=/tmp/qa43/review2/long; rm -rf $W; mkdir -p $W
N=$(printf 'a%.0s' $(seq 1 246)).pth
touch $W/$N && echo "OUT name (${#N} bytes) can be created"; rm $W/$N
PYTHONPATH=. .venv/bin/python -m server.model.random $W/$N --preset tiny; echo rc=$?
