"""Client leaves during a long prefill (non-stream and stream): is its task dropped?"""
import socket, json, time, httpx, sys
B = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8792"
port = int(B.rsplit(":", 1)[1])
def fire(body, path="/v1/chat/completions"):
    s = socket.create_connection(("localhost", port))
    d = json.dumps(body).encode()
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(d)}\r\n\r\n".encode() + d)
    return s
for stream in (False, True):
    for kind in ("chat", "comp", "task"):
        msgs = [{"role": "user", "content": f"x{i} {time.time()}"} for i in range(8000)]
        if kind == "chat": s = fire({"messages": msgs, "max_tokens": 3000, "stream": stream, "temperature": 0, "logit_bias": {"0": -100}})
        elif kind == "comp": s = fire({"prompt": " ".join(f"w{i}" for i in range(30000)) + str(time.time()), "max_tokens": 3000, "stream": stream, "logit_bias": {"0": -100}}, "/v1/completions")
        else: s = fire({"prompt": " ".join(f"w{i}" for i in range(30000)) + str(time.time()), "max_tokens": 3000, "stream": stream, "logit_bias": {"0": -100}}, "/v1/tasks/tmp")
        time.sleep(0.8); s.close(); t0 = time.time()
        seen = []
        for k in range(40):
            h = httpx.get(B + "/health").json(); seen.append((h["active"], h["queue"]))
            if k > 2 and h["active"] == 0 and h["queue"] == 0: break
            time.sleep(1)
        print(f"{kind} stream={stream}: idle after {time.time()-t0:.0f}s; (active,queue) samples {seen[:12]}")
