"""Prefix-cache use by API tasks, and OpenAI requests that start from a template state.

``prepare_tasks(rt, tpl, tasks, finish)`` is called by the OpenAI routes on the fresh tasks of
one request: it marks them eligible for the prefix cache (``cache_origin``; see
``server/task/cache_origin.py``) and, when the request's ``model`` names a template
(``rwkv-7:_name``, any text before the colon; ``find_template``), starts every task from that
template's state: its history and next token come first, then the request's prompt;
penalties start at zero and the random stream at its seed, as for any request.
``finish=False`` (chat): the state at the end of a chat reply is not stored — the next request
renders that reply without its reasoning, so it never shares those tokens.
"""

from __future__ import annotations

import asyncio

from server.api.routes.openai_schemas import OpenAIError
from server.task.manager import is_busy
from server.task.policy import loader_mismatch
from server.task.template_start import start_all
ALIAS = "rwkv-7"  # the loaded model's other name (``/v1/models``); ``rwkv-7:_name``: a template


def template_id(model: str | None) -> str | None:
    """``"rwkv-7:_name"`` -> ``"_name"``; None when the model names no template."""
    if not model or ":" not in model:
        return None
    name = model.rsplit(":", 1)[1]
    return name if name.startswith("_") and len(name) > 1 else None


async def find_template(rt, model: str | None):
    """The state template ``model`` names (``rwkv-7:_name``), None when it names none; 404
    ``model_not_found`` if there is none, 409 while it is still being built or when it was
    stored with another model. Looked up before the prompt's length is checked: its own
    not yet fed tokens count too (``routes.openai._check_length``)."""
    tid = template_id(model)
    if tid is None:
        await _refuse_misspelt(rt, model)
        return None
    tpl = rt.manager.held_template(tid) or await asyncio.to_thread(rt.manager.get_task, tid)
    if tpl is None:
        raise OpenAIError(404, f"The model '{model}' does not exist: no state template "
                          f"{tid} (import one with POST /v1/tasks/import_state)",
                          param="model", code="model_not_found")
    if is_busy(tpl):
        raise OpenAIError(409, f"State template {tid} is still being built; retry when "
                          "it has finished", param="model", code="template_busy")
    problem = loader_mismatch(tpl, rt.loader)
    if problem:  # (for good: the SDKs retry a 409 twice unless told not to)
        raise OpenAIError(409, f"State template {tid} does not fit the loaded model: "
                          f"{problem}", param="model", code="template_mismatch",
                          headers={"x-should-retry": "false"})
    return tpl


async def _refuse_misspelt(rt, model: str | None) -> None:
    """404 for ``rwkv-7:name`` (the loaded model's name or alias) when a template ``_name``
    exists: the template was meant, and was served silently by the base model. Other names
    with a colon (``rwkv-7:latest``, ``llama3:8b``) are unknown models, served as any other."""
    if not model or ":" not in model:
        return
    base, name = model.rsplit(":", 1)
    if base in (ALIAS, rt.model_name) and name and \
            f"_{name}" in await asyncio.to_thread(rt.manager.template_ids):
        raise OpenAIError(404, f"The model '{model}' does not exist; state template ids start "
                          f"with '_' ({base}:_{name})", param="model", code="model_not_found")


async def prepare_tasks(rt, tpl, tasks: list, finish: bool = True) -> None:
    """Mark ``tasks`` for the prefix cache; start them from the template ``tpl``
    (``find_template``'s) unless it is None."""
    origin = ""
    if tpl is not None and tpl._started_from is tpl.state:
        origin = start_all(tpl, tasks)  # its origin and pinned copy made: list copies only
    elif tpl is not None:  # in a thread: a big state's hash and pinned copy (``start_all``)
        origin = await asyncio.to_thread(start_all, tpl, tasks)
    for task in tasks:
        task.cache_origin = origin
        task.cache_finish = finish
