#!/bin/bash
# usage: t.sh label cmd...  -> runs in repo, prints rc and output tail
label=$1; shift
cd /tmp/qa43/cli/repo
out=$(timeout ${T:-120} bash -c "$*" 2>&1); rc=$?
echo "=== [$label] rc=$rc :: $*"
echo "$out" | tail -n ${N:-8}
echo "=== [$label] rc=$rc" >> /tmp/qa43/cli/log.txt; echo "$*" >>/tmp/qa43/cli/log.txt; echo "$out" >> /tmp/qa43/cli/log.txt
