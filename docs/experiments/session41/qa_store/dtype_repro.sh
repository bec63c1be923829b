#!/bin/bash
# repro: a stored template valid under fp32 state, served after a restart with RWKV_STATE_DTYPE=fp16
cd /tmp/qa_store; rm -f dtr.db*
./srv.sh a 8103 /tmp/qa_store/dtr.db; ./wait.sh 8103
T=$(curl -s -X POST localhost:8103/v1/tasks/create -H 'Content-Type: application/json' -d '{"prompt":"User: hello\n\nAssistant:","max_tokens":0}' | python3 -c 'import json,sys;print(json.load(sys.stdin)["task_id"])')
curl -s localhost:8103/v1/tasks/$T/export_state -o dtr.st
/work/main/.venv/bin/python - <<'PY'
import json, struct
d=open('/tmp/qa_store/dtr.st','rb').read(); n=struct.unpack('<Q',d[:8])[0]; h=json.loads(d[8:8+n])
body=bytearray(d[8+n:]); b,e=h['wkv']['data_offsets']; body[b:e]=struct.pack('<f',1e6)*((e-b)//4)
open('/tmp/qa_store/dtr_big.st','wb').write(d[:8+n]+bytes(body))
PY
echo "import on fp32 server: $(curl -s -X POST 'localhost:8103/v1/tasks/import_state?name=big' --data-binary @dtr_big.st -w ' [%{http_code}]')"
kill $(cat port8103.pid); sleep 4
./srv.sh a 8103 /tmp/qa_store/dtr.db RWKV_STATE_DTYPE=fp16; ./wait.sh 8103
echo "import of the same file on the fp16 server: $(curl -s -X POST 'localhost:8103/v1/tasks/import_state?name=big2' --data-binary @dtr_big.st -w ' [%{http_code}]')"
echo "stored _big used on the fp16 server:"
curl -s localhost:8103/v1/completions -H 'Content-Type: application/json' -d '{"model":"rwkv-7:_big","prompt":"hi","max_tokens":8,"temperature":0}' -w " [%{http_code}]\n"
curl -s -X POST localhost:8103/v1/tasks/_big/fork -H 'Content-Type: application/json' -d '{"prompt":" hi","max_tokens":8,"stream":true}' -w " [%{http_code}]\n" | tr -d '\n'; echo
grep -ci "warn.*_big\|error" a.log
kill $(cat port8103.pid); sleep 3
