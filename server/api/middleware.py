"""ASGI middleware: CORS, API key, body size limit, and a last-resort error reply.

Order, outermost first: ``CORSMiddleware`` (answers preflights on every path, puts CORS headers
on every reply, errors included, and turns an unexpected exception into a JSON 500 that still
carries them) -> ``ApiKeyMiddleware`` -> ``ShutdownBodyMiddleware`` -> ``BodyLimitMiddleware``
-> ``HeadMiddleware`` -> the app.

Error bodies follow the route family: ``{"detail": msg}`` on the Task API and ``/health``,
OpenAI's ``{"error": {...}}`` elsewhere (the OpenAI routes and anything unknown).
"""

from __future__ import annotations

import asyncio
import hmac
import json

from starlette.requests import ClientDisconnect

from server.api.stopping import ShuttingDown
from server.logger import get_logger

log = get_logger("api")
ALLOW_METHODS = "GET, POST, OPTIONS"  # (HEAD, like GET, needs no preflight)
PREFLIGHT_MAX_AGE = "600"


def error_body(path: str, status: int, message: str, code: str | None = None) -> bytes:
    """The JSON error body fitting ``path`` (Task API vs OpenAI shape)."""
    if path.startswith("/v1/tasks") or path == "/health":
        return json.dumps({"detail": message}).encode()
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 401:
        kind = "authentication_error"
    return json.dumps({"error": {"message": message, "type": kind, "param": None,
                                 "code": code}}).encode()


async def send_error(send, path: str, status: int, message: str, code: str | None = None,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = error_body(path, status, message, code)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": raw + (headers or [])})
    await send({"type": "http.response.body", "body": body})


def _header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return v.decode("latin-1")
    return None


class CORSMiddleware:
    """CORS for browser clients (OPENAI_COMPAT.md cases 2-3).

    ``origins``: ``"*"`` (any origin) or a comma-separated list. Preflights (``OPTIONS`` with
    ``Access-Control-Request-Method``) are answered here on every path, echoing the requested
    headers; private-network preflights get ``Access-Control-Allow-Private-Network: true``.
    """

    def __init__(self, app, origins: str = "*"):
        self.app = app
        items = [o.strip().rstrip("/") for o in origins.split(",") if o.strip()]
        self.any_origin = "*" in items
        self.origins = set(items)

    def _allow_origin(self, origin: str) -> str | None:
        if self.any_origin:
            return "*"
        return origin if origin.rstrip("/") in self.origins else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        origin = _header(scope, b"origin")
        allowed = self._allow_origin(origin) if origin else None
        if (scope["method"] == "OPTIONS" and origin
                and _header(scope, b"access-control-request-method") is not None):
            return await self._preflight(scope, send, allowed)
        cors = [] if allowed is None else [(b"access-control-allow-origin", allowed.encode())]
        if cors and not self.any_origin:
            cors.append((b"vary", b"Origin"))
        started = False

        async def send_cors(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": list(message.get("headers", [])) + cors}
            await send(message)

        try:
            await self.app(scope, receive, send_cors)
        except ClientDisconnect:  # the client hung up mid-body: no one to answer, no error
            log.debug(f"Client left during {scope['method']} {scope['path']} before its body ended")
        except Exception as e:  # never a bare 500 page: a JSON reply with CORS headers
            log.opt(exception=e).error(f"Unhandled error on {scope['method']} {scope['path']}: {e!r}")
            if not started:
                await send_error(send, scope["path"], 500, f"Internal server error: "
                                 f"{type(e).__name__}", "internal_error", cors)

    async def _preflight(self, scope, send, allowed: str | None) -> None:
        if allowed is None:
            return await send_error(send, scope["path"], 400, "Disallowed CORS origin")
        headers = [(b"access-control-allow-origin", allowed.encode()),
                   (b"access-control-allow-methods", ALLOW_METHODS.encode()),
                   (b"access-control-max-age", PREFLIGHT_MAX_AGE.encode()),
                   (b"content-length", b"0")]
        requested = _header(scope, b"access-control-request-headers")
        if requested:
            headers.append((b"access-control-allow-headers", requested.encode("latin-1")))
        if (_header(scope, b"access-control-request-private-network") or "").lower() == "true":
            headers.append((b"access-control-allow-private-network", b"true"))
        if not self.any_origin:
            headers.append((b"vary", b"Origin"))
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


class ApiKeyMiddleware:
    """With a key configured, every route but ``/health`` needs ``Authorization: Bearer <key>``
(``/health`` without it leaves out the prefix cache's figures: they move with other clients'
prompts, so they would tell a guesser whether a prompt was seen).

    The key is compared in constant time and never logged.
    """

    OPEN_PATHS = frozenset({"/health"})

    def __init__(self, app, api_key: str):
        self.app = app
        self._key = api_key.encode()

    def _authorized(self, scope) -> bool:
        auth = _header(scope, b"authorization") or ""
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(token.strip().encode("latin-1", "replace"), self._key)

    async def __call__(self, scope, receive, send):
        # no exception for OPTIONS: CORSMiddleware (outside) answers real preflights itself
        if scope["type"] == "http" and scope["path"] in self.OPEN_PATHS:
            # open, but what it shows may depend on the key (request.state.authorized)
            scope.setdefault("state", {})["authorized"] = self._authorized(scope)
        elif scope["type"] == "http" and not self._authorized(scope):
            return await send_error(send, scope["path"], 401, "Invalid or missing API key "
                                    "(send Authorization: Bearer <key>)", "invalid_api_key",
                                    [(b"www-authenticate", b"Bearer")])
        await self.app(scope, receive, send)


class TrailingSlashMiddleware:
    """A path's trailing slashes are dropped before routing: ``/v1/models/`` is served as
    ``/v1/models``. Starlette answered it with a 307 to an absolute URL built from the client's
    Host header and the connection's scheme (plain http behind a TLS proxy; a redirected POST
    sends its body again; session 40's QA)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] == "http" and len(path) > 1 and path.endswith("/"):
            scope = {**scope, "path": path.rstrip("/") or "/"}
            if scope.get("raw_path"):
                scope["raw_path"] = scope["raw_path"].rstrip(b"/") or b"/"
        await self.app(scope, receive, send)


class HeadMiddleware:
    """HEAD is served as GET without the body (RFC 9110: the headers a GET would get, its
    Content-Length included): uptime probes and link checkers send HEAD to ``/health`` and
    ``/v1/models``, and FastAPI's routes answered it 405 everywhere but where a route named it.
    The reply ends with its headers; after them the app hears that the client has gone (a
    stream stops as for a GET whose client left) and whatever body it still sends is dropped."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)
        started = False

        async def head_send(message):
            nonlocal started
            if message["type"] != "http.response.start":
                return  # the body, and anything after it: not sent for HEAD
            started = True
            await send(message)
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        async def head_receive():
            return {"type": "http.disconnect"} if started else await receive()

        await self.app({**scope, "method": "GET"}, head_receive, head_send)


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_bytes`` with 413 before any work is done. ``larger``:
    paths whose limit is the larger of ``max_bytes`` and what their callable returns (read per
    request: a state import's room depends on the model loaded after the app was made)."""

    def __init__(self, app, max_bytes: int, larger: dict | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.larger = larger or {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        room = self.larger.get(scope["path"])
        room = 0 if room is None else room()
        limit = max(self.max_bytes, room)
        # (the 413 names the rule that set the limit: session 40's QA)
        why = (": a state file of this model, with room for its history and metadata"
               if room > self.max_bytes else ", RWKV_MAX_BODY_BYTES")
        length = _header(scope, b"content-length")
        # with Transfer-Encoding the server reads the body as chunked and ignores any
        # Content-Length (RFC 9112 §6.3): only the bytes received count then
        if length is not None and _header(scope, b"transfer-encoding") is None:
            if not length.isdigit():
                return await send_error(send, scope["path"], 400, "Bad Content-Length header")
            if int(length) > limit:
                return await self._too_large(scope, send, limit, why)
            return await self.app(scope, receive, send)
        if _header(scope, b"transfer-encoding") is None:
            return await self.app(scope, receive, send)
        # chunked body of unknown size: read it (up to the limit) before the app sees it
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > limit:
                return await self._too_large(scope, send, limit, why)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope, send, limit: int, why: str) -> None:
        await send_error(send, scope["path"], 413, f"Request body too large (limit "
                         f"{limit} bytes{why})", "request_too_large")


class ShutdownBodyMiddleware:
    """A request whose body is still arriving when the server begins to shut down (the app's
    ``state.drain``) gets a 503 with Retry-After within ``BODY_GRACE_S``: it waited out
    uvicorn's 10 s, then was a plain-text 500 with a traceback (session 70's QA: an upload at
    8 KB/s). A body that comes in within the grace reaches its route, which refuses new work
    in its own words. The read raises ``ShuttingDown``; the routes answer it in their shape,
    and this middleware does where it came before them (a chunked body read by
    ``BodyLimitMiddleware``). Once the body is in, ``receive`` is the server's own (the routes
    watch it for a disconnect)."""

    BODY_GRACE_S = 1.0

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        drain = getattr(getattr(scope.get("app"), "state", None), "drain", None)
        if scope["type"] != "http" or drain is None:
            return await self.app(scope, receive, send)
        loop = asyncio.get_running_loop()
        body_in, started, deadline = False, False, None

        async def watched():
            nonlocal body_in, deadline
            if body_in:
                return await receive()
            get = asyncio.ensure_future(receive())
            if not drain.draining:
                stop = asyncio.ensure_future(drain.event.wait())
                try:
                    await asyncio.wait({get, stop}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stop.cancel()
            if not get.done():  # draining: the rest of the body has until the deadline
                deadline = deadline or loop.time() + self.BODY_GRACE_S
                await asyncio.wait({get}, timeout=max(0.0, deadline - loop.time()))
            if not get.done():
                get.cancel()
                raise ShuttingDown()
            message = get.result()
            body_in = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def watch_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, watched, watch_send)
        except ShuttingDown as e:
            if started:
                raise
            await send_error(send, scope["path"], 503, e.detail, e.code,
                             [(k.lower().encode(), v.encode()) for k, v in e.headers.items()])
