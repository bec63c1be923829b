"""SSE for the Task API (API.md §1): a header event, one event per chunk, then ``[DONE]``.

    data: {"task_id": "...", "prefill_time": 0.012}
    data: {"data": "<text>", "task_id": "...", "gen_time": 0.05, "speed": 640.0}
    data: [DONE]

Text never splits a UTF-8 character (``bridge.follow`` holds incomplete bytes back). Events are
separated by ``\\n\\n``; keep-alives are comment lines. A round that failed, or that the server's
shutdown cut short (``stopping.Drain``), gets an ``{"error": {…}, "task_id": …}`` event before
``[DONE]``.
"""

from __future__ import annotations

import anyio
from collections.abc import AsyncIterator, Callable

from sse_starlette import EventSourceResponse, ServerSentEvent

from server.api.bridge import follow
from server.api.safe_json import sse_json
from server.task.policy import is_temporary_id
from server.task.task import Task

PING_S = 15
SHUTDOWN_GRACE_S = 3.0  # below run.py's graceful-shutdown timeout


def _event(obj) -> ServerSentEvent:
    return ServerSentEvent(data=sse_json(obj), sep="\n")


def shutdown_message(task: Task) -> str:
    """What a Task API stream says when the server's shutdown stopped its task's round."""
    n = len(task.round_tokens())
    if is_temporary_id(task.task_id):
        return (f"The server is shutting down: temporary task {task.task_id} was stopped "
                f"after {n} tokens and is not kept; retry it once the server is back")
    return (f"The server is shutting down: task {task.task_id} was stopped after {n} tokens; "
            f"its tokens so far are saved: continue it (POST /v1/tasks/{task.task_id}/continue) "
            "once the server is back")


def _round_error(task: Task, this_round: list[int], drain) -> dict | None:
    """The error event's body for the round ``this_round`` that just ended (None: it ended
    well). Nothing is known of a round that a later one already replaced."""
    if task.round_output() is not this_round:
        return None
    if task.finish_reason == "error":
        message, code = f"Generation failed: {task.error}", "generation_error"
    elif drain is not None and drain.cut_short(task):
        message, code = shutdown_message(task), "server_shutting_down"
    else:
        return None
    # (the four fields of every error body, ``{"error": {...}}`` in API.md)
    return {"message": message, "type": "server_error", "param": None, "code": code}


async def task_events(task: Task, tokenizer, pos: int = 0,
                      on_disconnect: Callable[[], None] | None = None,
                      drain=None) -> AsyncIterator:
    """The task's SSE events from token ``pos``; ``on_disconnect`` runs if the client leaves
    before the task has finished (the creator of a temporary task stops it this way).
    ``drain``: the app's ``stopping.Drain``, which tells whether the shutdown cut it short."""
    header = False
    finished = False
    this_round = task.round_output()  # (the round follow reads: no await between)
    error = None
    tokens, seconds = 0, 0.0  # since the last text event: chunks that completed no character
    # (their tokens and time belong to the event whose text they begin)
    try:
        async for chunk in follow(task, tokenizer, pos, goes_on=True):
            if not header:
                header = True
                yield _event({"task_id": task.task_id, "prefill_time": task.prefill_time})
            if chunk.finished:  # before the last text is sent: a continue meanwhile starts a
                # new round, which resets the finish reason (the failure went unsaid)
                error = _round_error(task, this_round, drain)
            tokens, seconds = tokens + chunk.tokens, seconds + chunk.seconds
            if chunk.text:
                speed = tokens / seconds if seconds > 0 else 0.0
                yield _event({"data": chunk.text, "task_id": task.task_id,
                              "gen_time": seconds, "speed": speed})
                tokens, seconds = 0, 0.0
        if error is not None:
            yield _event({"error": error, "task_id": task.task_id})
        finished = True
        yield ServerSentEvent(data="[DONE]", sep="\n")
    finally:
        if not finished and on_disconnect is not None and not task.is_finished:
            on_disconnect()


def sse_response(task: Task, tokenizer, drain, pos: int = 0,
                 on_disconnect: Callable[[], None] | None = None) -> EventSourceResponse:
    """The SSE reply. When the server is asked to shut down, ``drain`` (the app's ``Drain``)
    stops the task, so the stream ends within ``SHUTDOWN_GRACE_S``: the text so far, an error
    event saying the shutdown stopped it, ``[DONE]``. The task stays as any stopped one
    (finished; a persistent one saved with its tokens, to be continued)."""
    shutdown = anyio.Event()  # sse-starlette's own signal (also a server without run.py's)

    async def stop_on_shutdown() -> None:
        await drain.stop_when_draining([task], also=shutdown)

    return EventSourceResponse(task_events(task, tokenizer, pos, on_disconnect, drain),
                               ping=PING_S,
                               sep="\n", shutdown_event=shutdown,
                               shutdown_grace_period=SHUTDOWN_GRACE_S,
                               data_sender_callable=stop_on_shutdown)
