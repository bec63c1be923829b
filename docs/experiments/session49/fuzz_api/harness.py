"""Send hand-written hostile requests; flag 5xx, slow replies, bad error shapes."""
import json, sys, time, httpx

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8792"
c = httpx.Client(base_url=BASE, timeout=35)
flags = []

def shape_ok(path, r):
    if r.status_code < 400:
        return True
    try:
        j = r.json()
    except Exception:
        return False
    if path.startswith("/v1/tasks") or path.startswith("/health"):
        return isinstance(j, dict) and "detail" in j
    e = j.get("error") if isinstance(j, dict) else None
    return isinstance(e, dict) and set(e) >= {"message", "type", "param", "code"} and isinstance(e["message"], str)

def send(label, method, path, body=None, raw=None, headers=None, stream=False):
    h = {"content-type": "application/json"} if raw is None or isinstance(raw, (bytes, str)) else {}
    if headers: h.update(headers)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    t = time.time()
    try:
        r = c.request(method, path, content=data, headers=h)
        txt = r.text
    except Exception as e:
        flags.append((label, "EXC", repr(e)))
        print(f"!! {label}: EXC {e!r} after {time.time()-t:.1f}s"); return None
    dt = time.time() - t
    bad = r.status_code >= 500 or dt > 30 or not shape_ok(path.split("?")[0], r)
    mark = "!!" if bad else "  "
    print(f"{mark} {label}: {r.status_code} {dt:.2f}s {txt[:300]!r}")
    if bad: flags.append((label, r.status_code, txt[:500]))
    return r
