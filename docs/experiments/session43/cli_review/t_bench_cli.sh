#!/bin/bash
# server.bench: --help, unknown bench, no args, --preset/--dtype choices in each bench
cd /tmp/qa43/review2/repo; export PYTHONPATH=. OMP_NUM_THREADS=1; PY=.venv/bin/python
for a in "--help" "-h" "nosuch" "" "decode --help"; do $PY -m server.bench $a >/tmp/qa43/review2/o.txt 2>&1; echo "[$a] rc=$? $(head -c 150 /tmp/qa43/review2/o.txt | tr '\n' ' ')"; done
for b in decode prefill stress gemv ttft pulse launch streams; do $PY -m server.bench $b --preset huge >/tmp/qa43/review2/o.txt 2>&1; echo "$b --preset huge rc=$? $(tail -1 /tmp/qa43/review2/o.txt | cut -c1-140)"; done
for b in decode prefill stress ttft pulse; do $PY -m server.bench $b --dtype fp8 >/tmp/qa43/review2/o.txt 2>&1; echo "$b --dtype fp8 rc=$? $(tail -1 /tmp/qa43/review2/o.txt | cut -c1-120)"; done
$PY -m server.bench.load --preset huge 2>&1 | tail -1
$PY -m server.bench.load --dtype fp8 --preset tiny 2>&1 | tail -2
$PY -m server.bench.stress --state-dtype fp8 --tasks 1 --max-tokens 1 --device cpu 2>&1 | tail -1
