"""A minimal HTTP/1.1 client for the benches: one keep-alive socket, each request written in one
``sendall``, a response read as it comes (``Content-Length`` or chunked). Against httpx (what
the openai SDK and ``server.bench.chat`` use by default) it leaves out the client's own Python
work, ~1.6-2.3 ms of a streamed chat request's time to first text on a 2-core CPU machine
(performance.md, session 33), so the time measured is the server's and the socket's.

Only what the benches need: POST/GET of JSON to one server, replies streamed as lines.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit


class RawClient:
    def __init__(self, base_url: str, timeout: float = 600):
        u = urlsplit(base_url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.buf = b""

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.buf = b""
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def request(self, method: str, path: str, body: dict | None = None) -> Iterator[bytes]:
        """Send one request; yield the reply's body in pieces as they arrive (all of it read
        when the iterator ends). Raises RuntimeError for a status other than 200."""
        payload = b"" if body is None else json.dumps(body).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
        status = self._send(head.encode() + payload)
        headers = {}
        while line := self._line():
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        parts = self._chunks() if chunked else iter([self._exactly(
            int(headers.get("content-length", 0)))])
        complete = False
        try:
            if status != 200:
                raise RuntimeError(f"{method} {path}: {status} {b''.join(parts)[:500]!r}")
            yield from parts
            complete = headers.get("connection", "").lower() != "close"
        finally:
            if not complete:  # left unread (or the server closes it): a new socket next time
                self.close()

    def _send(self, data: bytes) -> int:
        """Write a request; its reply's status. A kept socket the server closed while it was
        idle (uvicorn does after 5 s) is replaced once and the request sent again: nothing of
        a reply was read (it failed the bench's next request: session 34's review)."""
        reused = self.sock is not None
        try:
            self._connect().sendall(data)
            return int(self._line().split()[1])
        except ConnectionError:  # (reset, broken pipe, or closed before a status line)
            self.close()
            if not reused:
                raise
        self._connect().sendall(data)
        return int(self._line().split()[1])

    def _chunks(self) -> Iterator[bytes]:
        while True:
            size = int(self._line().split(b";")[0], 16)
            if size == 0:
                while self._line():  # trailers, then the empty line
                    pass
                return
            data = self._exactly(size)
            self._exactly(2)  # the chunk's CRLF
            yield data

    def lines(self, method: str, path: str, body: dict | None = None) -> Iterator[str]:
        """The reply's lines (an SSE stream's), each as soon as it is complete."""
        rest = b""
        for part in self.request(method, path, body):
            rest += part
            *done, rest = rest.split(b"\n")
            for line in done:
                yield line.decode().rstrip("\r")
        if rest:
            yield rest.decode()

    def get_json(self, path: str):
        return json.loads(b"".join(self.request("GET", path)))
