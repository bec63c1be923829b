"""Prometheus metrics: ``GET /metrics`` (text exposition format, prometheus-client).

Like every route but ``/health``, ``/metrics`` needs ``Authorization: Bearer <key>`` when
``RWKV_API_KEY`` is set (configure the scraper's ``authorization`` with the same key).

Series (each app has its own registry, so several apps in one process do not collide):

* ``rwkv_http_requests_total{route,method,status}`` — ``route`` is the route template
  (``/v1/tasks/{task_id}/stream``; for a reply given before routing, a 401 for a missing key
  or a 413 for a body past the limit, the template the path and method match), ``other`` for
  unmatched paths and for CORS preflights (``method``: ``other`` for a method outside GET,
  HEAD, POST, PUT, PATCH, DELETE, OPTIONS; ``status``: ``499``, nginx's "client closed request", when the client
  hung up before the reply started, e.g. mid-body: not a server error); and
  ``rwkv_http_request_duration_seconds{route}`` (until the last byte, streams included);
* ``rwkv_prompt_tokens_total``, ``rwkv_generated_tokens_total`` (tokens in and out),
  ``rwkv_prefill_tokens_total`` (prompt tokens actually computed: the rest came from the cache);
* ``rwkv_nonfinite_tasks_total``: tasks failed because the model's output became NaN or
  infinite (an alert on it catches a checkpoint that overflows in fp16);
* ``rwkv_time_to_first_token_seconds`` and ``rwkv_time_per_output_token_seconds`` histograms
  (see ``server/scheduler/stats.py``);
* gauges ``rwkv_queue_length``, ``rwkv_scoring_jobs``, ``rwkv_capacity``,
  ``rwkv_active_slots``, ``rwkv_max_batch_size``;
* prefix cache: ``rwkv_prefix_cache_hits_total``, ``..._misses_total``,
  ``..._tokens_saved_total``, ``..._evictions_total``, gauges ``..._entries``, ``..._bytes``,
  ``..._device_bytes``, ``..._max_bytes``;
* on CUDA, gauges ``rwkv_device_memory_{allocated,peak_allocated,reserved,used,total}_bytes``
  (``server/model/memory.py``).
"""

from __future__ import annotations

import logging
import time
import urllib.parse

from fastapi import Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from starlette.routing import Match

from server.model.memory import device_memory

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
# the ``method`` label's values; any other method a client sends counts as "other" (a label
# value per made-up method would let clients grow the series without bound)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
CLIENT_GONE = "499"  # the status label of a request whose client hung up before the reply


class Metrics:
    """The app's registry: HTTP series it records itself, runtime series read at scrape time."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.runtime = None  # set by the app's lifespan
        self.routes: list = []  # the app's routes, in matching order (set by create_app)
        self.requests = Counter("rwkv_http_requests", "HTTP requests by route, method and status",
                                ["route", "method", "status"], registry=self.registry)
        self.duration = Histogram("rwkv_http_request_duration_seconds",
                                  "HTTP request duration (streams: until the last byte)",
                                  ["route"], buckets=DURATION_BUCKETS, registry=self.registry)
        self.registry.register(_RuntimeCollector(self))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _RuntimeCollector:
    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def collect(self):
        rt = self.metrics.runtime
        sch = getattr(rt, "scheduler", None)
        if sch is None:
            return
        for name, doc, value in (("queue_length", "Tasks waiting for a slot", sch.num_waiting),
                                 ("scoring_jobs", "Prompts waiting to be scored or being "
                                  "scored (echo with logprobs): queue places too",
                                  sch.num_scoring),
                                 ("capacity", "Slots allocated (power of two)", sch.capacity),
                                 ("active_slots", "Slots holding a task", sch.num_active),
                                 ("max_batch_size", "Largest capacity", sch.max_batch_size)):
            yield GaugeMetricFamily(f"rwkv_{name}", doc, value=value)
        st = sch.stats.snapshot()
        yield CounterMetricFamily("rwkv_prompt_tokens", "Prompt tokens of admitted tasks "
                                  "(each of a request's n choices is one)",
                                  value=st["prompt_tokens"])
        yield CounterMetricFamily("rwkv_generated_tokens", "Tokens generated",
                                  value=st["generated_tokens"])
        yield CounterMetricFamily("rwkv_nonfinite_tasks", "Tasks failed because the model's "
                                  "output became NaN or infinite (a numeric overflow, a broken "
                                  "imported state)", value=st["nonfinite_tasks"])
        yield CounterMetricFamily("rwkv_prefill_tokens", "Prompt tokens computed by prefill",
                                  value=sch.prefiller.prefilled_tokens)
        yield CounterMetricFamily("rwkv_prefill_calls", "Prefill calls that computed those "
                                  "tokens (a call feeds its round's tasks together)",
                                  value=sch.prefiller.prefill_calls)
        yield CounterMetricFamily("rwkv_prefill_later_tokens",
                                  "Prompt tokens computed again after the first token (turn "
                                  "boundaries kept for the next request)",
                                  value=sch.prefiller.later_tokens)
        yield CounterMetricFamily("rwkv_prefill_boundaries_kept",
                                  "Turn boundaries a prefill pass handed out as it passed them "
                                  "(not computed again)", value=sch.prefiller.boundaries_kept)
        yield CounterMetricFamily("rwkv_prefill_warm_tokens",
                                  "Tokens computed after a chat reply: the history the next "
                                  "turn re-sends, cached before it arrives",
                                  value=sch.prefiller.warm_tokens)
        yield CounterMetricFamily("rwkv_prefill_warm_dropped",
                                  "Chat histories queued for the next turn that the next "
                                  "request fed in its own pass (it came before they ran)",
                                  value=sch.prefiller.warm_dropped)
        for key, name, doc in (("ttft", "time_to_first_token",
                                "Request (or queue) to first token"),
                               ("tpot", "time_per_output_token", "Seconds per decode step")):
            buckets, total = st[key]
            yield HistogramMetricFamily(f"rwkv_{name}_seconds", doc, buckets=buckets,
                                        sum_value=total)
        yield from _cache_series(sch.prefix_cache)
        yield from _memory_series(device_memory(rt.loader.model.device))


def _memory_series(memory):
    for key, doc in (("allocated", "Device bytes held by tensors"),
                     ("peak_allocated", "Most device bytes held by tensors since the start"),
                     ("reserved", "Device bytes held by the caching allocator (allocated, "
                      "cached, CUDA graph pools)"),
                     ("used", "Device bytes in use by every process (as nvidia-smi shows)"),
                     ("total", "Device memory")):
        if memory is not None and memory[key] is not None:  # (CUDA; used / total once read)
            yield GaugeMetricFamily(f"rwkv_device_memory_{key}_bytes", doc, value=memory[key])


def _cache_series(cache):
    stats = cache.stats() if cache is not None else {}
    for key, doc in (("hits", "Prefix cache lookups that found a prefix"),
                     ("misses", "Prefix cache lookups that found none"),
                     ("tokens_saved", "Prompt tokens loaded from the cache"),
                     ("evictions", "Entries dropped (LRU)")):
        yield CounterMetricFamily(f"rwkv_prefix_cache_{key}", doc, value=stats.get(key, 0))
    for key, doc in (("entries", "Entries"), ("bytes", "Bytes held (device + host)"),
                     ("device_bytes", "Bytes held in device memory"),
                     ("max_bytes", "Limit (RWKV_STATE_CACHE_MB)")):
        yield GaugeMetricFamily(f"rwkv_prefix_cache_{key}", doc, value=stats.get(key, 0))


async def metrics_endpoint(request: Request) -> Response:
    """Prometheus text exposition of the server's metrics."""
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)


class MetricsMiddleware:
    """Counts every HTTP request by route template, method and final status."""

    def __init__(self, app, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status, t0 = 500, time.perf_counter()
        started = gone = False

        async def watch_receive():
            nonlocal gone
            message = await receive()
            if message["type"] == "http.disconnect" and not started:
                gone = True
            return message

        async def record_status(message):
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
            await send(message)

        try:
            await self.app(scope, watch_receive, record_status)
        finally:
            route = _route_template(scope, self.metrics.routes)
            method = scope["method"] if scope["method"] in METHODS else "other"
            # a client gone before the reply started: whatever came after (a 500 for no reply
            # at all, FastAPI's 400 for a body cut short, a reply nobody read) reached no one
            code = CLIENT_GONE if gone else str(status)
            self.metrics.requests.labels(route, method, code).inc()
            self.metrics.duration.labels(route).observe(time.perf_counter() - t0)
            if gone:  # no reply: uvicorn writes no access line; the log and /metrics agree
                _access_line(scope, int(CLIENT_GONE))


def _route_template(scope, routes) -> str:
    """The template of the route that served the request; for one answered before routing
    (the API key's 401, the body limit's 413), that of the first of ``routes`` (the app's
    routes, ``Metrics.routes``) its path and method match; else "other" (a CORS preflight
    matches no route's method)."""
    route = scope.get("route")
    if route is None:
        if scope["method"] == "HEAD":  # served as GET on a copy of the scope (HeadMiddleware):
            scope = {**scope, "method": "GET"}  # the route it picked never shows here
        route = next((r for r in routes if r.matches(scope)[0] == Match.FULL), None)
    return getattr(route, "path", None) or "other"


def _access_line(scope, status: int) -> None:
    """An access-log line in uvicorn's form (its ``uvicorn.access`` logger) for a request it
    did not log."""
    client = scope.get("client")
    addr = f"{client[0]}:{client[1]}" if client else "-"
    # quoted as uvicorn's own lines have it: the decoded path may hold a newline (%0A) that
    # forged a log line of its own (session 41's QA); (uvicorn's path includes its root_path)
    path = urllib.parse.quote(scope.get("path", ""))
    if scope.get("query_string"):
        path += "?" + scope["query_string"].decode("latin-1")
    logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', addr, scope["method"],
                                             path, scope.get("http_version", "1.1"), status)
