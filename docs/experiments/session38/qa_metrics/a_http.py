from qa import *
wait_idle()
m0 = scrape()
expected = {}
def exp(route, method, status, n=1):
    k = f"rwkv_http_requests_total{{method={method},route={route},status={status}}}"
    expected[k] = expected.get(k, 0) + n
# health calls by wait_idle counted too: avoid calling health in this batch
for _ in range(3):
    r = c.get("/v1/models"); exp("/v1/models", "GET", r.status_code)
r = c.post("/v1/chat/completions", json={"messages": "not a list"}); print("bad chat", r.status_code); exp("/v1/chat/completions", "POST", r.status_code)
r = c.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}); print("bad json chat", r.status_code); exp("/v1/chat/completions", "POST", r.status_code)
r = c.post("/v1/tasks/create", json={"prompt": "hi", "bogus": 1}); print("bad create", r.status_code); exp("/v1/tasks/create", "POST", r.status_code)
r = c.post("/v1/tasks/create", json={"prompt": "hi", "max_tokens": "3"}); print("bad create2", r.status_code); exp("/v1/tasks/create", "POST", r.status_code)
r = c.get("/nope"); print("nope", r.status_code); exp("other", "GET", r.status_code)
r = c.post("/v1/nope2", json={}); print("nope2", r.status_code); exp("other", "POST", r.status_code)
r = c.get("/v1/tasks/TASK_doesnotexist/status"); print("status 404", r.status_code); exp("/v1/tasks/{task_id}/status", "GET", r.status_code)
r, dt = chat([{"role": "user", "content": "Hello there"}], model="rwkv-7:_nosuch", max_tokens=4); print("tpl 404", r.status_code, r.text[:150]); exp("/v1/chat/completions", "POST", r.status_code)
r = c.request("PROPFIND", "/v1/models"); print("PROPFIND", r.status_code); exp("/v1/models", "other", r.status_code)
r, dt = chat([{"role": "user", "content": "Hello there"}], max_tokens=8); print("chat ok", r.status_code, r.json()["usage"]); exp("/v1/chat/completions", "POST", r.status_code)
# stream, client disconnects after first data chunk
with c.stream("POST", "/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "Tell me a long story"}], "stream": True, "max_tokens": 400, "reasoning_effort": "none"}) as r:
    for line in r.iter_lines():
        if line.startswith("data: "):
            break
print("stream disconnected, status", r.status_code); exp("/v1/chat/completions", "POST", 200)
# client hangs up mid-body
s = socket.create_connection(("127.0.0.1", 8791))
s.sendall(b"POST /v1/tasks/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\": \"he")
time.sleep(0.5); s.close(); exp("/v1/tasks/create", "POST", 499)
time.sleep(2)
# the scrape after m0 counts as /metrics 200 -- m0's own scrape appears now
exp("/metrics", "GET", 200)
m1 = scrape()
d = delta(m0, m1)
got = {k: v for k, v in d.items() if k.startswith("rwkv_http_requests_total")}
print("\nrequests_total deltas vs expected:")
for k in sorted(set(got) | set(expected)):
    flag = "" if got.get(k, 0) == expected.get(k, 0) else "   <-- MISMATCH"
    print(f"  {k}: got {got.get(k,0):g} expected {expected.get(k,0)}{flag}")
print("\nduration counts by route vs request counts:")
byroute = {}
for k, v in got.items():
    route = re.search(r"route=([^,}]+)", k).group(1); byroute[route] = byroute.get(route, 0) + v
for k, v in d.items():
    if k.startswith("rwkv_http_request_duration_seconds_count"):
        route = re.search(r"route=([^,}]+)", k).group(1)
        print(f"  {route}: duration count {v:g}, requests {byroute.get(route)}", "" if v == byroute.get(route) else "<-- MISMATCH")
    if k.startswith("rwkv_http_request_duration_seconds_sum"): print("  ", k, round(v, 3))
