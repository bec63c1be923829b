#!/bin/bash
# a continue with no prompt after a constrained round that completed its JSON: 422 message blames "an imported state"
RF='{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":9}},"required":["n"],"additionalProperties":false}}}'
T=$(curl -s localhost:8794/v1/tasks/create -H 'Content-Type: application/json' -d '{"prompt":"User: json\n\nAssistant:","max_tokens":200,"seed":1,"response_format":'"$RF"'}' | python3 -c 'import json,sys;print(json.load(sys.stdin)["task_id"])')
sleep 2; curl -s localhost:8794/v1/tasks/$T/get_result; echo
curl -s localhost:8794/v1/tasks/$T/continue -H 'Content-Type: application/json' -d '{"max_tokens":20}'; echo
