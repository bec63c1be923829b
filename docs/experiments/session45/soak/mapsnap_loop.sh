#!/bin/bash
# smaps breakdown of the server every 120 s for 22 minutes
PID=$(cat /tmp/soak45_out/server.pid); T0=$(date +%s)
for i in $(seq 0 11); do echo "t=$(( $(date +%s) - T0 )) $(python3 docs/experiments/session41/qa_soak/mapsnap.py $PID)"; sleep 120; done
