"""How ``run.py`` runs uvicorn: its HTTP/1.1 protocol (h11) with a deadline for every request
head, and a server that tells the app when it is asked to stop (``DrainingServer``).

uvicorn closes an idle keep-alive connection ``timeout_keep_alive`` seconds after a response, but
it sets no deadline before the first request, and any byte received cancels that timer: a client
that opens connections and sends nothing, or sends its headers a byte at a time, holds them for
ever (slowloris). The API key cannot stop it (it comes in the headers): one client could hold
every file descriptor of the process and lock everyone out. Here a connection must deliver a
complete request head (request line and headers) within ``RWKV_HEADER_TIMEOUT_S`` of being
opened or of its previous response, or it is closed; so is one whose request body stalls that
long (no byte of it: headers announcing a body that never comes held the connection too), or
comes slower than ``MIN_BODY_RATE`` on average: a body's deadline is that long after its head
plus a second per ``MIN_BODY_RATE`` bytes received (the rule of Apache's mod_reqtimeout). A body
trickled a byte every few seconds held its connection for ever, and 20,000 of them every file
descriptor (session 26's QA). Replies (streams) are not limited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from server.logger import get_logger

log = get_logger("api")

MIN_BODY_RATE = 500  # bytes a second a request body must average (after its first deadline)


class HeaderTimeoutH11Protocol(H11Protocol):
    header_timeout: float = 20.0  # run.py sets RWKV_HEADER_TIMEOUT_S

    def connection_made(self, transport) -> None:
        self._header_timer = None
        self._body_start: float | None = None  # when the current request's body began
        self._body_bytes = 0  # bytes received since (about: the head's last bytes count)
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.SEND_BODY:  # a body on its way: its next byte in time
            if self._body_start is None:
                self._body_start = self.loop.time()
            self._body_bytes += len(data)
            self._arm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start the next (pipelined) request at once
        self._body_start, self._body_bytes = None, 0
        self._arm_header_timer()

    def connection_lost(self, exc) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        if not self.transport.is_closing():
            delay = self.header_timeout
            if self._body_start is not None:  # the body's deadline: its average rate
                due = self._body_start + self.header_timeout + self._body_bytes / MIN_BODY_RATE
                delay = max(0.0, min(delay, due - self.loop.time()))
            self._header_timer = self.loop.call_later(delay, self._on_header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _on_header_timeout(self) -> None:
        self._header_timer = None
        # IDLE: no complete request head since the timer was armed; SEND_BODY: no byte of the
        # body since (a request whose body is in, waiting for its reply, is DONE)
        if (self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
                and not self.transport.is_closing()):
            self.transport.close()


def with_header_timeout(seconds: float) -> type[HeaderTimeoutH11Protocol]:
    """The protocol class for ``uvicorn.run(http=...)`` with a head deadline of ``seconds``."""
    return type("HeaderTimeoutH11Protocol", (HeaderTimeoutH11Protocol,),
                {"header_timeout": float(seconds)})


ACCEPT_ERROR = "socket.accept() out of system resource"  # asyncio's message (EMFILE, ...)


def quiet_accept_errors(loop, log, every_s: float = 10.0):
    """Install on ``loop`` an exception handler that logs asyncio's refused ``accept()`` (no
    file descriptor left: EMFILE, ENFILE, ...) once per ``every_s`` seconds, one line with the
    count since, instead of a traceback each time (~40,000 lines, 54 MB in 40 s under a
    connection flood; session 26's QA); every other error goes to the handler there was.
    Returns that handler (``loop.set_exception_handler`` puts it back)."""
    before = loop.get_exception_handler()
    state = {"last": float("-inf"), "refused": 0}

    def handler(loop, context) -> None:
        if context.get("message") != ACCEPT_ERROR:
            if before is not None:
                before(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        state["refused"] += 1
        now = loop.time()
        if now - state["last"] >= every_s:
            log.error(f"Connections refused: {state['refused']} accept() calls failed "
                      f"({context.get('exception')!r}); no file descriptor is left (too "
                      "many open connections; the process's limit is `ulimit -n`)")
            state["last"], state["refused"] = now, 0

    loop.set_exception_handler(handler)
    return before


REPEAT_SIGINT_S = 1.0  # a second SIGINT sooner than this is the same Ctrl-C (not a force quit)


class DrainingServer(uvicorn.Server):
    """uvicorn's server (what ``uvicorn.run`` runs for one process), calling ``on_exit`` when it
    is asked to stop (SIGTERM, Ctrl-C), in the signal handler after uvicorn's own: the app's
    ``Drain.begin``, so that plain requests end now with what they have (``stopping.Drain``).

    Asked to stop while still starting (the model loading, kernels compiling: the event loop is
    busy in the app's start-up, so uvicorn would act only once it served), the process exits
    at once: nothing is served or unsaved yet (a 0.4B demo took 11 s to stop, then bound its
    port first). A second SIGINT within ``REPEAT_SIGINT_S`` is the same Ctrl-C delivered
    twice (to the process group and forwarded by a launcher such as ``uv run``), not uvicorn's
    force quit, which cut every open stream."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None],
                 lost: Callable[[], bool] = lambda: False):
        super().__init__(config)
        self._on_exit = on_exit
        self._lost = lost
        self._exit_at: float | None = None

    @contextlib.contextmanager
    def capture_signals(self):
        """uvicorn's, which raises the stopping signal again once the server has stopped (the
        process ends by it: how a clean stop on SIGTERM looks to a supervisor), unless the
        shutdown lost tasks (``lost()``): the caller then exits with a status of its own."""
        with super().capture_signals():
            yield
            if self._lost():  # (uvicorn's list of the signals it will raise again)
                getattr(self, "_captured_signals", []).clear()

    def handle_exit(self, sig, frame) -> None:
        if not self.started:
            log.warning(f"Stopped while starting ({signal.Signals(sig).name}): nothing was "
                        "served yet")
            signal.signal(sig, signal.SIG_DFL)  # ended by the signal, as after a served
            os.kill(os.getpid(), sig)  # stop (uvicorn raises it again once it has drained)
        now = time.monotonic()
        if sig == signal.SIGINT and self._exit_at is not None \
                and now - self._exit_at < REPEAT_SIGINT_S:
            return
        self._exit_at = self._exit_at or now
        super().handle_exit(sig, frame)
        self._on_exit()
