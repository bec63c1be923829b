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

import torch

from server.api.routes.openai_schemas import OpenAIError
from server.logger import get_logger
from server.model.state import State
from server.task.cache_origin import origin_of
from server.task.manager import is_busy
from server.task.policy import model_mismatch

log = get_logger(__name__)
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
    problem = model_mismatch(tpl, rt.loader.cfg)
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
    if tpl is not None and getattr(tpl, "_started_from", None) is tpl.state:
        origin = _start_all(tpl, tasks)  # its origin and pinned copy made: list copies only
    elif tpl is not None:  # in a thread: a big state's hash and pinned copy (``_start_all``)
        origin = await asyncio.to_thread(_start_all, tpl, tasks)
    for task in tasks:
        task.cache_origin = origin
        task.cache_finish = finish


def _start_all(tpl, tasks: list) -> str:
    """Start every task from ``tpl`` (fresh tasks, a finished template: nothing else touches
    them meanwhile); returns the template's cache origin. The first time for a template state
    it hashes the state (``origin_of``) and, on CUDA, pins a copy (``load_ready``): at 2.9B
    tens of milliseconds, run off the event loop; then ``tpl._started_from`` is that state,
    and later requests start inline (a thread's two hand-overs saved)."""
    origin = origin_of(tpl)  # first: it may settle the template's state_decoded
    for task in tasks:
        start_from(task, tpl)
    if _pin_settled(tpl):  # (not after a failed pin: each request tries again, off the loop)
        tpl._started_from = tpl.state
    return origin


def _pin_settled(tpl) -> bool:
    """Whether ``load_ready(tpl)`` returns without trying to pin: no state, a process that has
    not started CUDA, or the pinned copy of this state made."""
    kept = getattr(tpl, "_pinned", None)
    return tpl.state is None or not torch.cuda.is_initialized() or (
        kept is not None and kept[0] is tpl.state)


def template_head(tpl) -> list[int]:
    """The tokens ``tpl`` holds but has not fed yet (its last prompt token, as a rule): what a
    request from it feeds before its own prompt; [] for a bare state (a state-tuning file)."""
    return list(tpl.pending) + ([] if tpl.current_token is None else [tpl.current_token])


def start_from(task, tpl) -> None:
    """Put ``tpl``'s state and consumed tokens under ``task``'s not yet fed prompt. The state is
    shared, not copied: nothing writes into a task's state tensors (the engine loads them into
    a slot and gives the task new ones when it is done: ``policy.signature``). A copy cost a
    request from a template 16-18 ms at 2.9B on the 2-core machine, before its first token
    (docs/experiments/session37/clone_cost.py)."""
    task.pending = template_head(tpl) + task.pending
    task.history = list(tpl.history)
    task.state = load_ready(tpl)
    task.state_decoded = tpl.state_decoded


def load_ready(tpl):
    """``tpl.state`` as its requests start from it: in a process that uses CUDA (a CUDA
    server: its model is there), a copy in pinned memory, made once and kept on the template
    (not stored), so that a slot loads it at the host link's speed (pageable memory is copied
    through a staging buffer, and the copy waits for it). Not in a CPU server on a machine
    with a GPU: pinning would start a CUDA context there."""
    st = tpl.state
    if not _pin_settled(tpl):  # (no copy yet, or the template's state was replaced)
        try:
            tpl._pinned = (st, State(st.shift.pin_memory(), st.wkv.pin_memory()))
        except RuntimeError as e:  # (no pinned memory to be had): the request goes on from
            # the pageable state, a slower load, not a failed request
            log.warning(f"Pinning template {tpl.task_id}'s state failed, using it as it is: {e}")
            return st
    kept = getattr(tpl, "_pinned", None)
    return kept[1] if kept is not None and kept[0] is st else st
