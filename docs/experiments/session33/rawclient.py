"""Time to first text of one streamed chat request sent again and again (a whole-prompt cache
hit after the first), from httpx (the client of server.bench.chat and of the openai SDK) and
from a raw socket that writes the request in one send and scans the bytes it receives, taking
turns on one keep-alive connection each. The difference is the client's own share of a
measured TTFT. Usage (a server already running on PORT):

    OMP_NUM_THREADS=1 uv run python docs/experiments/session33/rawclient.py PORT N
"""
import json, socket, statistics, sys, time
import httpx
url_port = int(sys.argv[1]); N = int(sys.argv[2])
msgs = [{"role": "system", "content": "You are a helpful assistant."}] + \
       [{"role": "user" if i % 2 == 0 else "assistant", "content": ("word %d " % i) * 60} for i in range(19)]
body = {"model": "rwkv-7", "messages": msgs, "max_tokens": 4, "stream": True, "temperature": 0, "reasoning_effort": "none"}
raw_body = json.dumps(body).encode()
def httpx_once(c):
    t0 = time.perf_counter(); t = None
    with c.stream("POST", "/v1/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if t is None and line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                t = time.perf_counter() - t0
        return t
def ttft_first(c):
    t0 = time.perf_counter()
    with c.stream("POST", "/v1/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                return time.perf_counter() - t0, r
def raw_once(s):
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(raw_body)) + raw_body
    t0 = time.perf_counter(); s.sendall(req); buf = b""; t = None
    while True:
        d = s.recv(65536); buf += d
        if t is None and b'"content":"' in buf.replace(b'"content":""', b''):
            t = time.perf_counter() - t0
        if b"data: [DONE]" in buf:
            break
    # drain chunked terminator
    while not buf.endswith(b"0\r\n\r\n"):
        buf += s.recv(65536)
    return t
c = httpx.Client(base_url=f"http://127.0.0.1:{url_port}", timeout=60)
s = socket.create_connection(("127.0.0.1", url_port)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(3): httpx_once(c); raw_once(s)
a, b = [], []
for _ in range(N):
    a.append(httpx_once(c)); time.sleep(0.02); b.append(raw_once(s)); time.sleep(0.02)
print("httpx median %.2f ms, raw median %.2f ms" % (statistics.median(a)*1e3, statistics.median(b)*1e3))
