#!/bin/bash
while pgrep -f "run_one.sh a " >/dev/null; do sleep 2; done
while curl -s -o /dev/null http://127.0.0.1:8792/health; do sleep 1; done
./run_one.sh b 1080 MALLOC_MMAP_THRESHOLD_=131072 MALLOC_ARENA_MAX=2
