#!/bin/bash
# x-guidance values at the schema's top level (json_rule spreads it): 500s
for xg in '"abc"' '[1]' '5' 'true' '{"whitespace_flexible": true}'; do
  for url in /v1/tasks/tmp /v1/completions; do
    printf '%-32s %-18s ' "$xg" "$url"
    curl -s -o /tmp/qa46c/qa/xg.body -w '%{http_code} ' localhost:8794$url -H 'Content-Type: application/json' \
      -d "$( [ $url = /v1/completions ] && echo "{\"model\":\"rwkv-7\"," || echo "{" )"'"prompt":"x","max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","x-guidance":'"$xg"'}}}}'
    head -c 160 /tmp/qa46c/qa/xg.body; echo
  done
done
printf 'nested "abc" tmp: '
curl -s localhost:8794/v1/tasks/tmp -H 'Content-Type: application/json' -d '{"prompt":"x","max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","properties":{"a":{"type":"string","x-guidance":"abc"}}}}}}' | head -c 200; echo
