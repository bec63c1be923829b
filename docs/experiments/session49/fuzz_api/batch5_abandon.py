"""Abandon streams mid-way (OpenAI and Task API); then check /health for leftover active tasks."""
import socket, json, time, threading, httpx, resource, sys
HOST, PORT = "localhost", int(sys.argv[1]) if len(sys.argv) > 1 else 8792
B = f"http://{HOST}:{PORT}"
def raw_abandon(path, body, read_bytes=200, method="POST", rst=False):
    s = socket.create_connection((HOST, PORT))
    data = json.dumps(body).encode() if body is not None else b""
    req = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
    s.sendall(req)
    got = b""
    while len(got) < read_bytes:
        ch = s.recv(4096)
        if not ch: break
        got += ch
    if rst:
        import struct
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    return got
def health():
    return httpx.get(B + "/health").json()
M = [{"role": "user", "content": "hi"}]
t0 = time.time()
for i in range(40):
    kind = i % 5
    if kind == 0: raw_abandon("/v1/chat/completions", {"messages": M, "max_tokens": 2000, "stream": True}, rst=i % 2 == 0)
    elif kind == 1: raw_abandon("/v1/completions", {"prompt": "hi", "max_tokens": 2000, "stream": True, "n": 3}, rst=i % 2 == 0)
    elif kind == 2: raw_abandon("/v1/tasks/tmp", {"prompt": "hi", "max_tokens": 2000, "stream": True}, rst=i % 2 == 0)
    elif kind == 3: raw_abandon("/v1/chat/completions", {"messages": M, "max_tokens": 2000}, read_bytes=0, rst=i % 2 == 0)  # non-stream, closed at once
    elif kind == 4: raw_abandon("/v1/completions", {"prompt": "hi", "max_tokens": 2000, "stream": True, "logprobs": 5, "echo": True}, rst=i % 2 == 0)
for k in range(30):
    h = health()
    if h["active"] == 0 and h["queue"] == 0: break
    time.sleep(1)
print("after abandon:", {k: h[k] for k in ("active", "queue", "finishing", "scoring", "capacity")}, f"{time.time()-t0:.1f}s")
# Task API: persistent task streamed by several subscribers, each abandoned
tid = httpx.post(B + "/v1/tasks/create", json={"prompt": "hi", "max_tokens": 300}).json()["task_id"]
for i in range(10):
    raw_abandon(f"/v1/tasks/{tid}/stream?pos={i}", None, method="GET", rst=i % 2 == 0)
time.sleep(2)
print("task status", httpx.get(f"{B}/v1/tasks/{tid}/status").json())
for k in range(60):
    h = health()
    if h["active"] == 0: break
    time.sleep(1)
print("final:", {k: h[k] for k in ("active", "queue", "finishing", "scoring", "capacity")})
