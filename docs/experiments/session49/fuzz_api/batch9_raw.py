import socket, time, sys
PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8792
BODY = b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
def raw(label, data, wait=5.0, shut=False):
    s = socket.create_connection(("localhost", PORT)); s.settimeout(wait)
    t = time.time(); s.sendall(data)
    if shut:
        try: s.shutdown(socket.SHUT_WR)
        except OSError: pass
    out = b""
    try:
        while True:
            c = s.recv(65536)
            if not c: break
            out += c
    except socket.timeout:
        out += b"<TIMEOUT>"
    except ConnectionResetError:
        out += b"<RST>"
    s.close()
    first = out.split(b"\r\n", 1)[0]
    bodyi = out.find(b"\r\n\r\n")
    print(f"{label}: {first!r} {time.time()-t:.2f}s body={out[bodyi+4:bodyi+204]!r}")
P = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
raw("ok", P + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("cl-short", P + b"Content-Length: 10\r\n\r\n" + BODY)
raw("cl-long", P + b"Content-Length: 500\r\n\r\n" + BODY, wait=25)
raw("cl-neg", P + b"Content-Length: -5\r\n\r\n" + BODY)
raw("cl-hex", P + b"Content-Length: 0x3c\r\n\r\n" + BODY)
raw("cl-plus", P + b"Content-Length: +60\r\n\r\n" + BODY)
raw("cl-huge", P + b"Content-Length: 99999999999999999999999999\r\n\r\n" + BODY)
raw("cl-dup", P + b"Content-Length: %d\r\nContent-Length: 5\r\n\r\n" % len(BODY) + BODY)
raw("cl-te", P + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % len(BODY) + BODY + b"\r\n0\r\n\r\n")
raw("te-bad-size", P + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + BODY + b"\r\n0\r\n\r\n")
raw("te-huge-size", P + b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n" + BODY + b"\r\n0\r\n\r\n")
raw("te-no-end", P + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % len(BODY) + BODY + b"\r\n", wait=25)
raw("te-ext", P + b"Transfer-Encoding: chunked\r\n\r\n%x;foo=bar\r\n" % len(BODY) + BODY + b"\r\n0\r\nTrailer: x\r\n\r\n")
raw("te-gzip", P + b"Transfer-Encoding: gzip, chunked\r\n\r\n%x\r\n" % len(BODY) + BODY + b"\r\n0\r\n\r\n")
raw("te-identity", P + b"Transfer-Encoding: identity\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("expect", P + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("http10", b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("http09", b"GET /health\r\n\r\n")
raw("http2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
raw("no-host", b"POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("nul-header", P + b"X-A: a\x00b\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("latin1-header", P + b"Authorization: Bearer \xff\xfe\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("origin-latin1", P + b"Origin: http://\xff.com\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("preflight-latin1", b"OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nOrigin: http://a\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: x-\xff\xfe\r\n\r\n")
raw("huge-header", P + b"X-A: " + b"a" * 200000 + b"\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("many-headers", P + b"".join(b"X-%d: a\r\n" % i for i in range(20000)) + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("pipelined", (P + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY) * 3)
raw("pipelined-stream", (P + b"Content-Length: %d\r\n\r\n" % (len(BODY) + 15) + BODY[:-1] + b',"stream":true}') * 2)
raw("bad-method", b"G\x00T /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("abs-uri", b"GET http://evil/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("star-uri", b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("path-nul", b"GET /v1/tasks/%00/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("path-raw-space", b"GET /v1/tasks/a b/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("path-bad-pct", b"GET /v1/tasks/%zz/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("path-utf8-raw", b"GET /v1/tasks/\xff\xfe/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("path-dots", b"GET /v1/tasks/../../health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("path-slashes", b"GET /v1/tasks/////status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("path-trailing", b"POST /v1/chat/completions////// HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
raw("path-only-slashes", b"GET ////// HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("query-huge", b"GET /v1/tasks/list?" + b"a=1&" * 20000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("query-bad-pct", b"GET /v1/tasks/list?limit=%ff%fe&order=%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("query-after-nul", b"GET /v1/tasks/list?after=%00%ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("query-after-long", b"GET /v1/tasks/list?order=id&after=" + b"z" * 300 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("query-order-bad", b"GET /v1/tasks/list?order=%ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
raw("ws-upgrade", b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
raw("h2c-upgrade", b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
