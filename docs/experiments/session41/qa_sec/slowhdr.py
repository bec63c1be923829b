import socket, time
s=socket.create_connection(("localhost",8104)); t0=time.time()
req=b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a"*200 + b"\r\n\r\n"
try:
    for i,ch in enumerate(req):
        s.sendall(bytes([ch])); time.sleep(0.5)
    print("sent all", time.time()-t0, s.recv(100))
except Exception as e:
    print("closed after", round(time.time()-t0,1), "s:", repr(e))
# after close, test slow body trickle on a POST with key
s=socket.create_connection(("localhost",8104)); t0=time.time()
s.sendall(b"POST /v1/tasks/tmp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
try:
    for i in range(200):
        s.sendall(b"          "); time.sleep(0.5)
    print("body trickle never closed", time.time()-t0)
except Exception as e:
    print("body trickle closed after", round(time.time()-t0,1), "s:", repr(e))
