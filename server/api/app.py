"""The FastAPI application: ``create_app(settings=None, runtime=None)``.

The lifespan sets up logging, builds the runtime (model, ``DynamicScheduler`` daemon, TaskManager;
see ``lifecycle``) unless one is given, and on shut-down stops generation, flushes the task store
and frees the device. Routes: ``/health``, ``/metrics``, the Task API (``/v1/tasks``, state files
included) and the OpenAI routes.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import sys
import threading
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.api.http_protocol import quiet_accept_errors
from server.api.lifecycle import (EXIT_OPERATOR_ERROR, build_runtime, close_runtime, freeze_heap,
                                  operator_error)
from server.api.metrics import Metrics, MetricsMiddleware, metrics_endpoint
from server.api.middleware import (ApiKeyMiddleware, BodyLimitMiddleware, CORSMiddleware,
                                   HeadMiddleware, ShutdownBodyMiddleware,
                                   TrailingSlashMiddleware, error_body)
from server.api.routes import openai, states, tasks
from server.api.safe_json import SafeJSONResponse, unreadable_body, validation_error_reply
from server.api.stopping import Drain
from server.api.task_service import TaskService
from server.logger import get_logger, setup_logging
from server.model.memory import device_memory
from server.model.state import State
from server.scheduler.prefix_cache import state_nbytes
from server.task.policy import TaskUnreadable
from server.task.store import is_busy_error, is_damage_error, is_full_error, unusable

log = get_logger("api")


class _ServingInterpreter:
    """The interpreter's settings while apps serve; the process's own come back when the last
    serving app stops (apps in one process may stop in any order).

    * GIL hand-over interval (``RWKV_GIL_SWITCH_US``): the scheduler thread launches each
      decode step from Python, between the event loop's turns; at Python's default 5 ms
      hand-over it can wait that long for the GIL while the loop streams the last pulse's
      tokens (the likely reason for what was measured: 256 streams at 2.9B decoded 32-34k
      tok/s a pulse at 5 ms against 36-37k at 0.1 ms; docs/performance.md, session 16).
    * The collector's generation-0 threshold (``RWKV_GC_THRESHOLD``): at Python's 700 a
      young-generation collection ran every few requests, ~0.5 ms on the scheduler's thread
      (a generation-1 one ~1.2 ms) before a request's pass was launched: a 2.9B server's
      cached chat turns took 9.5-9.8 ms to their first token over HTTP against 9.2 at 50,000
      (medians, alternating; none ran then in 20 chat requests; docs/performance.md,
      session 39). The start-up objects are frozen (``freeze_heap``), so a collection walks
      what requests left; one of 50,000 young objects took 2.6-7.3 ms on the 2-core CPU
      machine (docs/experiments/session39/gc_pause.py): rarer, longer pauses."""

    def __init__(self):
        self._lock = threading.Lock()
        self._apps = 0
        self._before = (sys.getswitchinterval(), gc.get_threshold())

    def enter(self, switch_us: int, gc_threshold: int) -> None:
        with self._lock:
            if self._apps == 0:
                self._before = (sys.getswitchinterval(), gc.get_threshold())
            self._apps += 1
            sys.setswitchinterval(switch_us / 1e6)
            gc.set_threshold(gc_threshold, *self._before[1][1:])

    def leave(self) -> None:
        with self._lock:
            self._apps -= 1
            if self._apps == 0:
                sys.setswitchinterval(self._before[0])
                gc.set_threshold(*self._before[1])


_serving_interpreter = _ServingInterpreter()


def _lifespan(settings, runtime, freeze: bool):
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        setup_logging(settings.verbose)
        try:
            rt = runtime if runtime is not None else build_runtime(settings)
        except Exception as e:
            line = operator_error(e)
            if line is None:  # a bug: its traceback is logged
                raise
            log.error(line)
            # run.py exits with it (uvicorn's is 3 for any failed start) and keeps the error's
            # traceback, which starlette hands uvicorn to log, out of the log (a SystemExit
            # raised here was logged with one, then exit 3; session 31's QA)
            app.state.startup_exit_code = EXIT_OPERATOR_ERROR
            raise
        app.state.runtime = rt
        app.state.drain.bind(asyncio.get_running_loop())
        app.state.metrics.runtime = rt
        app.state.task_service = TaskService(rt, app.state.drain)
        log.info(f"Serving {rt.loader.name} (max batch {settings.max_batch_size}, "
                 f"buffer {settings.buffer_size})")
        if not settings.api_key:  # (say so: it may be a mistake; an empty one is refused)
            log.warning("No API key: every client that reaches this port (and any web page a "
                        "local browser opens) can use the API; set RWKV_API_KEY to require one")
        if freeze:
            log.info(f"{freeze_heap():,} start-up objects frozen (full garbage collections "
                     "no longer walk them)")
        _serving_interpreter.enter(settings.gil_switch_us, settings.gc_threshold)
        loop = asyncio.get_running_loop()
        handler_before = quiet_accept_errors(loop, log)
        try:
            yield
        finally:
            loop.set_exception_handler(handler_before)
            _serving_interpreter.leave()
            if freeze:
                gc.unfreeze()
            app.state.task_service.close()
            if runtime is None:  # a runtime passed in belongs to the caller
                app.state.lost_at_exit = close_runtime(rt)  # (run.py's exit status)

    return lifespan


def _health(request: Request) -> dict:
    rt = request.app.state.runtime
    sch = rt.scheduler
    thread = getattr(sch, "_thread", None)
    store = rt.manager.store_status()
    return {
        # "degraded": the task database refuses writes (a full disk, say): tasks are kept in
        # memory and written when it takes them again (lost if the process ends first); or a
        # read found it damaged (``task_store.damaged``)
        "status": "ok" if store["ok"] else "degraded",
        "model": rt.loader.name,
        "loaded": True,
        "demo": bool(rt.settings.demo),
        "scheduler_alive": bool(thread is not None and thread.is_alive()),
        "capacity": sch.capacity,
        "max_batch_size": sch.max_batch_size,
        "active": sch.num_active,
        "queue": sch.num_waiting,
        "scoring": sch.num_scoring,  # prompts to score (echo+logprobs): they take queue places
        "finishing": sch.num_finishing,  # out of the slots, state on its way home
        "task_store": store,
        # CUDA only: bytes held by tensors / by the caching allocator / on the device
        **({"device_memory": memory} if (memory := device_memory(rt.loader.model.device))
           else {}),
        # without the key (when one is set) no cache figures: they reveal others' prompts
        **({"prefix_cache": _cache_health(sch)}
           if getattr(request.state, "authorized", True) else {}),
    }


def _cache_health(sch) -> dict:
    """Prefix cache figures (``enabled: false`` when RWKV_STATE_CACHE_MB is 0) and the prompt
    tokens prefill actually computed: before the first token (``prefilled_tokens``, in
    ``prefill_calls`` calls of the engine's prefill: one a chat turn, when no checkpoint stops
    it) and again
    after it (``later_tokens``: turn boundaries kept for the next request, when the pass that
    passed them could not hand them out: ``boundaries_kept`` counts those it did) and after a chat
    reply (``warm_tokens``: the reply as the next turn re-sends it; ``warm_dropped``: such
    histories whose next turn came first and fed them in its own pass); ``align``: prompts are
    cut and resumed at multiples of it (RWKV_SPLIT_INVARIANT; 1: anywhere)."""
    cache = getattr(sch, "prefix_cache", None)
    stats = cache.stats() if cache is not None else {"enabled": False}
    return {**stats, "align": sch.prefiller.align,
            "prefilled_tokens": sch.prefiller.prefilled_tokens,
            "prefill_calls": sch.prefiller.prefill_calls,
            "later_tokens": sch.prefiller.later_tokens,
            "boundaries_kept": sch.prefiller.boundaries_kept,
            "warm_tokens": sch.prefiller.warm_tokens,
            "warm_dropped": sch.prefiller.warm_dropped}


async def _database_error(request: Request, exc: sqlite3.DatabaseError) -> Response:
    """The task database failed under a request (a file damaged while serving): a 500 naming
    the file and what to do, not a bare "DatabaseError". Locked by another connection past the
    busy timeout: a 503 with Retry-After (it was a 500 advising to check the disk). Full (no
    room on its disk): a 507. Neither a 507 nor a 500 is to be retried at once (the openai SDKs
    retried them twice; the disk or the file needs an operator; session 72's QA). A refused
    write shows on /health (``TaskStore.refused``)."""
    manager = request.app.state.runtime.manager
    if is_damage_error(exc):
        manager.note_damage(exc)  # (/health: degraded)
    message = str(unusable(manager.store.path, exc))
    log.error(f"{request.method} {request.url.path}: {message}")
    busy = is_busy_error(exc)
    status, code = ((503, "database_locked") if busy else (507, "storage_full")
                    if is_full_error(exc) else (500, "database_error"))
    body = error_body(request.url.path, status, message, code)
    headers = {"Retry-After": "1"} if busy else NO_RETRY  # (the same request meets the same
    # full disk, read-only file, damage or I/O error: the openai SDKs retried it twice at once)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


# a failure that the same request again cannot mend (damaged pages, an unreadable record): the
# openai SDKs retried such a 500 twice (OPENAI_COMPAT 13; session 70's QA)
NO_RETRY = {"x-should-retry": "false"}


async def _unreadable_task(request: Request, exc: TaskUnreadable) -> Response:
    """A stored record that cannot be decoded: a 500 saying so (delete removes it)."""
    log.error(f"{request.method} {request.url.path}: {exc}")
    body = error_body(request.url.path, 500, str(exc), "unreadable_task")
    return Response(body, status_code=500, media_type="application/json", headers=NO_RETRY)


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """An unknown path or a wrong method (404/405): FastAPI's ``{"detail": …}`` on the Task API
    and ``/health``, OpenAI's error shape elsewhere (OpenAI clients show nothing useful else)."""
    path = request.url.path
    why = unreadable_body(request.headers.get("content-encoding"), exc.__cause__) \
        if exc.status_code == 400 else None  # (FastAPI's "error parsing the body": its cause)
    if path.startswith("/v1/tasks") or path == "/health":
        if why:  # a 422 naming the problem, as every other malformed body (API.md)
            return SafeJSONResponse({"detail": [{"type": "json_invalid", "loc": ["body"],
                                                 "msg": why}]}, status_code=422)
        return await http_exception_handler(request, exc)
    code = getattr(exc, "code", None)  # (``ShuttingDown``'s: its message says it all)
    body = error_body(path, exc.status_code, why or (exc.detail if code else
                                                     f"{exc.detail}: {request.method} {path}"),
                      code)
    return Response(body, status_code=exc.status_code, headers=exc.headers,
                    media_type="application/json")


STATE_FILE_SLACK = 16 << 20  # bytes beside the state in a file: its history, its metadata


def _state_file_room(app) -> int:
    """Bytes a state file of the loaded model may take (its state in fp32, and room for its
    metadata): a 2.9B export is ~21 MB, past the default RWKV_MAX_BODY_BYTES (a 413 on the
    import of an export; session 23's QA). 0 before the model is loaded."""
    rt = getattr(app.state, "runtime", None)
    if rt is None:
        return 0
    shapes = State.zeros(rt.loader.cfg, 1, device="meta")  # fp32: no memory, the layout's sizes
    return state_nbytes(shapes) + STATE_FILE_SLACK


def create_app(settings=None, runtime=None, freeze_heap: bool = False) -> FastAPI:
    """The app; ``settings`` default to ``server.config.settings``. ``freeze_heap``: once
    started, the objects made so far are frozen for the garbage collector (``lifecycle.
    freeze_heap``: a served process's full collections took ~0.1-0.2 s); for a process that
    serves (``run.py``), not for one that starts many apps (tests)."""
    if settings is None:
        settings = runtime.settings if runtime is not None else _default_settings()
    app = FastAPI(title="RWKV-Server", version="0.1.0",
                  redirect_slashes=False,  # served instead: TrailingSlashMiddleware
                  lifespan=_lifespan(settings, runtime, freeze_heap),
                  description="Batched RWKV-7 inference: Task API and OpenAI-compatible API")
    app.add_api_route("/health", _health, methods=["GET"], tags=["server"],
                      response_class=SafeJSONResponse,
                      summary="Model, scheduler and queue state")
    app.add_exception_handler(RequestValidationError, validation_error_reply)  # echoes any input
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(sqlite3.DatabaseError, _database_error)
    app.add_exception_handler(TaskUnreadable, _unreadable_task)
    routers = (openai.router, tasks.router, states.router)  # first: routes are matched in
    for router in routers:                                   # order, chat is the hot path
        app.include_router(router)
    app.state.metrics = Metrics()
    app.state.drain = Drain()  # begun by the server when it is asked to shut down (run.py)
    app.add_api_route("/metrics", metrics_endpoint, methods=["GET"], tags=["server"],
                      summary="Prometheus metrics (API key rule as other routes)",
                      response_class=PlainTextResponse)  # (the schema said JSON)
    # (a reply given before routing is counted under the route its request names)
    app.state.metrics.routes = [*(r for router in routers for r in router.routes),
                                *(r for r in app.router.routes if getattr(r, "path", None))]
    # added innermost first: the path's normalisation ends up outermost, then metrics, CORS
    app.add_middleware(HeadMiddleware)  # HEAD on every GET route (probes)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes,
                       larger={"/v1/tasks/import_state": lambda: _state_file_room(app)})
    app.add_middleware(ShutdownBodyMiddleware)  # (outside it: its chunked reads are watched)
    if settings.api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=settings.api_key)
    app.add_middleware(CORSMiddleware, origins=settings.cors_origins)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)  # sees all
    app.add_middleware(TrailingSlashMiddleware)  # outermost: the others see the path served
    return app


def _default_settings():
    from server.config import settings

    return settings
