#!/bin/bash
# SIGTERM while constrained requests run, then restart
cd /tmp/qa46b
PORT=8793
RWKV_TASK_DB_PATH=/tmp/qa46b/qa/tasks2.db uv run python run.py --demo tiny --port $PORT > qa/server2.log 2>&1 &
UVPID=$!
for i in $(seq 60); do curl -sf localhost:$PORT/health >/dev/null && break; sleep 1; done
PYPID=$(pgrep -P $UVPID -f "run.py")
echo "server python pid $PYPID"
uv run python - <<'PY' &
import asyncio, json, httpx, time
B = "http://localhost:8793/v1/chat/completions"
def body(i):
    if i % 2:
        return {"model": "rwkv-7", "messages": [{"role": "user", "content": f"x{i}"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required", "max_tokens": 2000, "seed": i, "stream": i % 4 == 1}
    return {"model": "rwkv-7", "messages": [{"role": "user", "content": f"x{i}"}], "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties": {"t": {"type": "string"}}, "required": ["t"]}}}, "max_tokens": 2000, "seed": i, "stream": i % 4 == 0}
async def one(cl, i):
    b = body(i); t0 = time.time()
    try:
        if b["stream"]:
            last = []
            async with cl.stream("POST", B, json=b) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: "): last.append(line[6:])
            return (i, "stream", r.status_code, last[-1][:200] if last else None, round(time.time() - t0, 1))
        r = await cl.post(B, json=b)
        return (i, "plain", r.status_code, r.text[:200], r.headers.get("retry-after"), round(time.time() - t0, 1))
    except Exception as e:
        return (i, "EXC", type(e).__name__, str(e)[:100], round(time.time() - t0, 1))
async def main():
    async with httpx.AsyncClient(timeout=120) as cl:
        res = await asyncio.gather(*[one(cl, i) for i in range(24)])
        for r in res: print(r)
asyncio.run(main())
PY
CLIENT=$!
sleep 4
curl -s localhost:$PORT/health | head -c 200; echo
T0=$(date +%s.%N)
kill -TERM $PYPID
wait $UVPID; echo "server exit rc=$? after $(echo "$(date +%s.%N) - $T0" | bc) s"
wait $CLIENT
echo "--- restart"
RWKV_TASK_DB_PATH=/tmp/qa46b/qa/tasks2.db uv run python run.py --demo tiny --port $PORT > qa/server2b.log 2>&1 &
UVPID=$!
for i in $(seq 60); do curl -sf localhost:$PORT/health >/dev/null && break; sleep 1; done
curl -s localhost:$PORT/v1/chat/completions -H 'content-type: application/json' -d '{"model":"rwkv-7","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"g","parameters":{"type":"object","properties":{"a":{"enum":[1,2]}},"required":["a"],"additionalProperties":false}}}],"tool_choice":"required","max_tokens":50}'; echo
curl -s localhost:$PORT/health | head -c 200; echo
kill -TERM $(pgrep -P $UVPID -f run.py); wait $UVPID; echo "second exit rc=$?"
grep -i -n "traceback\|exception\|error" qa/server2.log qa/server2b.log | head -20
