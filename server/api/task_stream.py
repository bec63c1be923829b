"""SSE for the Task API (API.md §1): a header event, one event per chunk, then ``[DONE]``.

    data: {"task_id": "...", "prefill_time": 0.012}
    data: {"data": "<text>", "task_id": "...", "gen_time": 0.05, "speed": 640.0}
    data: [DONE]

Text never splits a UTF-8 character (``bridge.follow`` holds incomplete bytes back). Events are
separated by ``\\n\\n``; keep-alives are comment lines.
"""

from __future__ import annotations

import anyio
from collections.abc import AsyncIterator, Callable

from sse_starlette import EventSourceResponse, ServerSentEvent

from server.api.bridge import follow
from server.api.safe_json import sse_json
from server.task.task import Task

PING_S = 15
SHUTDOWN_GRACE_S = 3.0  # below run.py's graceful-shutdown timeout


def _event(obj) -> ServerSentEvent:
    return ServerSentEvent(data=sse_json(obj), sep="\n")


async def task_events(task: Task, tokenizer, pos: int = 0,
                      on_disconnect: Callable[[], None] | None = None) -> AsyncIterator:
    """The task's SSE events from token ``pos``; ``on_disconnect`` runs if the client leaves
    before the task has finished (the creator of a temporary task stops it this way)."""
    header = False
    finished = False
    try:
        async for chunk in follow(task, tokenizer, pos):
            if not header:
                header = True
                yield _event({"task_id": task.task_id, "prefill_time": task.prefill_time})
            if chunk.text:
                speed = chunk.tokens / chunk.seconds if chunk.seconds > 0 else 0.0
                yield _event({"data": chunk.text, "task_id": task.task_id,
                              "gen_time": chunk.seconds, "speed": speed})
        if task.finish_reason == "error":
            yield _event({"error": {"message": f"Generation failed: {task.error}",
                                    "type": "server_error"}, "task_id": task.task_id})
        finished = True
        yield ServerSentEvent(data="[DONE]", sep="\n")
    finally:
        if not finished and on_disconnect is not None and not task.is_finished:
            on_disconnect()


def sse_response(task: Task, tokenizer, pos: int = 0,
                 on_disconnect: Callable[[], None] | None = None) -> EventSourceResponse:
    """The SSE reply. When the server is asked to shut down, the task is stopped so the stream
    still ends normally (last chunk, ``[DONE]``) within ``SHUTDOWN_GRACE_S``."""
    shutdown = anyio.Event()

    async def stop_on_shutdown() -> None:
        await shutdown.wait()
        task.stop()

    return EventSourceResponse(task_events(task, tokenizer, pos, on_disconnect), ping=PING_S,
                               sep="\n", shutdown_event=shutdown,
                               shutdown_grace_period=SHUTDOWN_GRACE_S,
                               data_sender_callable=stop_on_shutdown)
