#!/bin/bash
B=http://localhost:8104
paths=(/health /health/ //health /metrics /metrics/ //metrics /v1/models /v1/models/ //v1/models /v1//models /v1/models/rwkv-7 /v1/tasks/list /v1/tasks/list/ //v1/tasks/list /v1/tasks/%2e%2e/ /v1/tasks/..%2Fhealth/status "/v1/tasks/%2Fhealth" /%68ealth /HEALTH /health%2F /health%00 "/health;x" "/health?x=1" /docs /openapi.json /redoc /docs/oauth2-redirect /v1/tasks/x/status /v1/tasks/x/export_state /v1/chat/completions /v1/completions /nonexistent / "/v1/tasks/list?api_key=secret" "/v1/models?key=secret")
for p in "${paths[@]}"; do
  for m in GET HEAD OPTIONS; do
    a=$(curl -s --path-as-is -o /tmp/qa_sec/b -w '%{http_code}' -X $m $( [ $m = HEAD ] && echo -I) "$B$p" --max-time 5)
    printf '%-34s %-7s nokey=%s %s\n' "$p" $m "$a" "$(head -c 90 /tmp/qa_sec/b | tr '\n' ' ')"
  done
done
