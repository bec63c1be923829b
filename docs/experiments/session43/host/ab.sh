#!/bin/bash
# usage: ab.sh TAG ROUNDS  -- alternates base and repo (patched), probe --gpu-like --repeat 3
PY=/tmp/qa43/host/repo/.venv/bin/python
for r in $(seq 1 $2); do
  for tree in base repo; do
    (cd /tmp/qa43/host/$tree && $PY /tmp/qa43/host/probe.py --repeat 3 --gpu-like --out /tmp/qa43/host/ab_$1_${tree}_$r.json > /tmp/qa43/host/ab_$1_${tree}_$r.log 2>&1)
    echo "$tree r$r: $(grep -A16 '^turn:' /tmp/qa43/host/ab_$1_${tree}_$r.log | grep -E 'arr->add_in|cpu step_in->mp_in|  step_in->mp_in|add_in->mp_in' | awk '{printf "%s=%s ", $1 ($2=="step_in->mp_in"?"_cpu":""), ($2=="step_in->mp_in"?$3:$2)}')"
  done
done
