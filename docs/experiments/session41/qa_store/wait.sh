#!/bin/bash
# wait.sh PORT [timeout]; on success writes the listening pid to /tmp/qa_store/port$PORT.pid
for i in $(seq 1 ${2:-120}); do
  if curl -sf localhost:$1/health >/dev/null; then
    ss -ltnp "sport = :$1" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 > /tmp/qa_store/port$1.pid; exit 0; fi
  sleep 0.5; done; exit 1
