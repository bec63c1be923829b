import httpx, json, time
B = "http://localhost:8871"
c = httpx.Client(base_url=B, timeout=30)
def show(label, r, n=400):
    body = r.text
    print(f"--- {label}: {r.status_code} ct={r.headers.get('content-type')}\n    {body[:n]}")
    return r
def sse(path, method="GET", json_body=None, timeout=60, raw=False):
    lines = []
    with c.stream(method, path, json=json_body, timeout=timeout) as r:
        hdr = dict(r.headers)
        st = r.status_code
        buf = b""
        for chunk in r.iter_bytes():
            buf += chunk
    return st, hdr, buf.decode("utf-8", "replace")
def wait_done(tid, t=60):
    t0=time.time()
    while time.time()-t0<t:
        r = c.get(f"/v1/tasks/{tid}/get_result")
        if r.status_code!=200 or r.json().get("finished"): return r
        time.sleep(0.3)
    return r
