#!/bin/bash
# cfg.sh NAME [wl args --] ENV...
NAME=$1; shift
WLA=""
if [ "$1" = "--wl" ]; then WLA=$2; shift 2; fi
cd /tmp/qa42_cfg
./srv.sh $NAME "$@" || exit 1
(cd /work/main && timeout 600 uv run python /tmp/qa42_cfg/wl.py http://127.0.0.1:8431 /tmp/qa42_cfg/o_$NAME.json --long $WLA)
./stop.sh
python3 cmp.py o_default.json o_$NAME.json
grep -iE "warn|error|traceback" log_$NAME.txt | grep -v "DEMO" | head -10
