"""Task API (``/v1/tasks``): the endpoints of API.md §1.

Create-like endpoints (``tmp``, ``create``, ``fim``, ``fork``, ``continue``) answer at once with a
``TaskResponseModel`` (``result: ""``), or with an SSE stream when ``stream`` is true. A
``max_tokens=0`` request (template mode) answers once its prefill is done, with ``finished: true``.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError

from server.api.chat import fim_prompt
from server.api.schemas.tasks import (I64_MAX, ContinueRequest, CreateRequest, FimRequest,
                                      TaskInfo, TaskList, TaskResponseModel)
from server.api.task_service import TASK_NOT_FOUND, TaskService, invalid, is_busy
from server.task.manager import TaskNotFound
from server.task.policy import TaskUnreadable, is_template_id, is_temporary_id
from server.task.state_templates import template_name
from server.api.stopping import ShuttingDown, finish_watched, stop_round
from server.api.task_stream import sse_response
from server.task.task import Status, Task, new_task_id

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])
_SSE = {"text/event-stream": {"schema": {"type": "string"}}}
NOT_FOUND = {404: {"description": "Task not found"}}
CREATED = {200: {"content": _SSE, "description": "JSON, or an SSE stream when stream=true"},
           400: {"description": "Prompt too long"},
           503: {"description": "Queue full, or shutting down (Retry-After)"}}
RESUMED = {**CREATED, **NOT_FOUND, 403: {"description": "Template (read-only)"},
           409: {"description": "Task running, or its state was not kept"}}


def get_service(request: Request) -> TaskService:
    return request.app.state.task_service


async def _started(svc: TaskService, task: Task, stream: bool, creator_owns: bool,
                   new: bool = True, request: Request | None = None):
    """The reply to a create-like request once ``task`` is submitted (``new``: made by this
    request, a create's or a fork's, not a continued one; ``request``: a temporary task's,
    whose client leaving stops and drops it)."""
    if stream:
        stop = task.stop if creator_owns else None  # a temporary task dies with its stream
        return sse_response(task, svc.loader.tokenizer, svc.drain, 0, stop)
    if task.max_tokens == 0:  # prefill only: the state is ready when we answer
        await _prefilled(svc, task, new, request if creator_owns else None)
        return svc.reply(task)
    return svc.reply(task, finished=False)


async def _prefilled(svc: TaskService, task: Task, new: bool, request: Request | None) -> None:
    """Wait for a prefill-only round, stopping it if the server begins to shut down (it
    waited out uvicorn's 10 s, then a plain-text 500: a QA report, session 70). Cut short, a
    task this request made is dropped (its id was never given out) and the reply is a 503 to
    retry; a continued one keeps what it had, prompt tokens not yet fed among them, and the
    503 says so (no Retry-After: the same request again would append its prompt twice).
    ``request`` (a temporary task's): its client leaving stops and drops the task too (its
    prefill went on to the end for nobody; the same QA)."""
    if await finish_watched(task, svc.drain, request):
        await svc.forget(task)
        return  # (nobody reads the reply)
    if not svc.drain.cut_short(task):
        return
    if new:
        await svc.forget(task)
        raise ShuttingDown()
    raise HTTPException(503, f"The server is shutting down: {task.task_id}'s prefill stopped "
                        f"with {len(task.pending)} prompt tokens still to feed; the task keeps "
                        "them: continue it without a prompt once the server is back")


async def _create(svc: TaskService, body: CreateRequest | FimRequest, prompt, tmp: bool,
                  request: Request | None = None):
    params = svc.sampling(body, defaults=True)  # (its 422s before a long prompt is encoded)
    settings = await svc.round_settings(body)
    fim = isinstance(body, FimRequest)
    tokens = await svc.encode(prompt, "prefix" if fim else "prompt")
    task = svc.new_task(tokens, tmp, params)
    task.stop_at_turn = not fim  # (code: "User" after a blank line is the middle's own text)
    task.logit_bias, task.constraint = settings
    await svc.submit_new(task)
    return await _started(svc, task, body.stream, tmp, request=request)


@router.post("/tmp", response_model=TaskResponseModel, responses=CREATED)
async def create_tmp(body: CreateRequest, request: Request,
                     svc: TaskService = Depends(get_service)):
    """A temporary task (``TMP_…``): never written to the database."""
    return await _create(svc, body, body.prompt, tmp=True, request=request)


@router.post("/create", response_model=TaskResponseModel, responses=CREATED)
async def create_task(body: CreateRequest, svc: TaskService = Depends(get_service)):
    """A persistent task (``TASK_…``), written to the database when it finishes."""
    return await _create(svc, body, body.prompt, tmp=False)


@router.post("/fim", response_model=TaskResponseModel, responses=CREATED)
async def fill_in_middle(body: FimRequest, request: Request,
                         svc: TaskService = Depends(get_service)):
    """Fill in the middle (temporary task)."""
    if not body.prefix and not body.suffix:
        raise invalid("prefix", "prefix and suffix must not both be empty", "")
    return await _create(svc, body, fim_prompt(body.prefix, body.suffix), tmp=True,
                         request=request)


@router.get("/list", response_model=TaskList)
async def list_tasks(svc: TaskService = Depends(get_service),
                     offset: int = Query(0, ge=0, le=I64_MAX,
                                         description="db_tasks from this position"),
                     limit: int = Query(100, ge=0, le=10_000, description="db_tasks at most"),
                     order: Literal["recent", "id"] | None = Query(
                         None, description="db_tasks most recently written first (the default), "
                         "or by id (with ``after``: always)"),
                     after: str | None = Query(
                         None, max_length=256, description="db_tasks past this id, by id: a "
                         "page's last id gives the next page, whatever was written, created or "
                         "deleted between (offsets shift then)")):
    """Ids in memory, and ``limit`` stored ids from ``offset`` (most recently written first:
    API.md's first 100 by default; a client pages through the rest with ``after``)."""
    if after is not None and order == "recent":  # (a cursor pages by id: the order asked for
        # was ignored without a word)
        raise RequestValidationError([{
            "type": "value_error", "loc": ("query", "order"), "input": order,
            "msg": "after=<id> pages in id order: leave order out or give order=id"}])
    return await svc.store(svc.manager.list_all_tasks, offset=offset, limit=limit,
                           by_id=order == "id", after=after)


@router.get("/{task_id}/get_result", response_model=TaskResponseModel, responses=NOT_FOUND)
async def get_result(task_id: str, svc: TaskService = Depends(get_service)):
    return svc.result(await svc.get(task_id))


@router.get("/{task_id}/stream", responses={200: {"content": _SSE}, **NOT_FOUND,
                                            409: {"description": "Neither running nor "
                                                                 "finished (continue it)"}})
async def stream(task_id: str, pos: int = Query(0, ge=0, description="token offset"),
                 svc: TaskService = Depends(get_service)):
    """SSE of the task's output from token ``pos``; any number of subscribers at once."""
    task = await svc.get(task_id)
    await svc.check_running(task)  # (a 409: nothing would ever end the stream)
    return sse_response(task, svc.loader.tokenizer, svc.drain, pos)


@router.get("/{task_id}/status", response_model=TaskInfo, responses=NOT_FOUND)
async def status(task_id: str, svc: TaskService = Depends(get_service)):
    return svc.info(await svc.get(task_id))


def _resume(svc: TaskService, task: Task, tokens: list[int], body: ContinueRequest,
            params: dict, settings: tuple, tmp: bool, named: str):
    """Append ``tokens`` to an idle task, update its parameters and submit it. Synchronous: no
    other request can change the task between the caller's checks and this. A full queue is a
    503 before the task is changed: changed first, a refused continue left the prompt appended
    and the last round's output gone, and each retry (the openai SDK retries 503s) appended the
    prompt again (a review, session 14). The prompt's length counts the tokens the task has
    not fed yet (``check_prompt_length``: a template's from a state exported mid-prompt).
    ``params``: ``svc.sampling(body)``'s, taken before anything (its 422s: a fork's before the
    state is copied). ``settings``: ``svc.round_settings(body)``'s, the round's logit biases and
    grammar. ``named``: the id the request named (a fork's source: its copy's id means nothing
    to it)."""
    if (not tokens and task.current_token is None and not task.pending
            and params.get("max_tokens", task.max_tokens) > 0):
        # (an imported state-tuning file, or a state exported without its next token): the
        # round would end at once with nothing generated
        raise invalid("prompt", f"{named} has no token to generate from (its last round "
                      "ended at end-of-text, which is not fed, or its state came without one, "
                      "e.g. an imported state): give a prompt", body.prompt)
    svc.check_prompt_length(len(tokens), len(task.pending))
    svc.check_params(task, params)
    svc.check_room()
    task.continue_gen(tokens or None, **params)
    task.logit_bias, task.constraint = settings
    if tmp:  # a temporary task's state is kept only when it is all the task produces
        task.keep_state = task.max_tokens == 0
    svc.submit(task)


@router.post("/{task_id}/fork", response_model=TaskResponseModel, responses=RESUMED)
async def fork(task_id: str, request: Request, body: ContinueRequest | None = None,
               tmp: bool = Query(False, description="make the copy a TMP_ task"),
               svc: TaskService = Depends(get_service)):
    """A new task starting from a copy of ``task_id``'s state, then as continue."""
    body = body or ContinueRequest()
    params = svc.sampling(body, defaults=False)
    settings = await svc.round_settings(body)
    tokens = await svc.encode(body.prompt, required=False)
    task = await svc.copy(await svc.get(task_id), new_task_id("TMP" if tmp else "TASK"))
    await svc.register(task, pin=True)
    try:
        _resume(svc, task, tokens, body, params, settings, tmp, task_id)
    except Exception:  # refused (4xx/503: HTTPException, or a 422 naming a field): no copy kept
        await svc.forget(task)
        raise
    finally:
        await svc.unpin(task)
    return await _started(svc, task, body.stream, tmp, request=request)


@router.post("/{task_id}/continue", response_model=TaskResponseModel, responses=RESUMED)
async def continue_task(task_id: str, body: ContinueRequest | None = None,
                        svc: TaskService = Depends(get_service)):
    """Append ``prompt`` (if given) to the task and generate again; 409 while it runs."""
    body = body or ContinueRequest()
    params = svc.sampling(body, defaults=False)
    settings = await svc.round_settings(body)
    tokens = await svc.encode(body.prompt, required=False)
    task = await svc.get(task_id, pin=True)  # (not evicted before it is submitted)
    try:
        if task.is_template:
            raise HTTPException(403, "Templates are read-only; fork them instead")
        svc.check_usable(task)
        tmp = is_temporary_id(task.task_id)
        _resume(svc, task, tokens, body, params, settings, tmp, task_id)
        if not svc.manager.holds(task_id, task):
            # deleted since ``get`` (a delete in a store thread): it found the task idle and so
            # did not stop it; submitted now, no route could reach or stop it (it ran to
            # max_tokens in a slot; a QA report, session 26). A delete after this check finds it
            # busy and stops it.
            task.stop()
            raise HTTPException(404, TASK_NOT_FOUND)
    finally:
        await svc.unpin(task)
    return await _started(svc, task, body.stream, tmp, new=False)


# the longest a stop's reply waits for its task to end (it ends at the scheduler's next step)
STOP_WAIT_S = 10.0


@router.post("/{task_id}/stop", response_model=TaskInfo, responses=NOT_FOUND)
async def stop(task_id: str, svc: TaskService = Depends(get_service)):
    """End generation at the next step; the tokens so far are kept. Answers once the task has
    stopped (``status`` 3: a ``continue``, ``fork`` or ``as_template`` may follow at once), or
    after 10 s with its status then."""
    # (it answered at once, the task still running: an SDK's stop() then continue_() was a 409
    # "is running; stop it", up to ~1 s on a loaded CPU server; session 40's QA. A round that
    # another request's continue began meanwhile is not stopped: ``stop_round``)
    task = await svc.get(task_id)
    if is_busy(task):
        await stop_round(task, STOP_WAIT_S)
    return svc.info(task)


@router.post("/{task_id}/as_template", response_model=TaskResponseModel,
             responses={**NOT_FOUND, 409: {"description": "Task running, its state was not "
                                                       "kept, the name taken, or "
                                                       "RWKV_MAX_TEMPLATES reached"},
                        422: {"description": "An unusable name"}})
async def as_template(task_id: str, svc: TaskService = Depends(get_service),
                      name: str | None = Query(None, description=(
                          "the template's id (a leading '_' is added if missing: 'my_tpl' "
                          "makes '_my_tpl'); default a new '_TMPL_<hex>'"))):
    """Copy a finished task into a new read-only template ``_TMPL_<hex>`` (or ``_name``)."""
    try:
        tid = "_TMPL_" + new_task_id("X")[2:] if name is None else template_name(name)
    except ValueError as e:
        raise HTTPException(422, str(e)) from None
    task = await svc.get(task_id)  # (first: an unknown id is a 404 with the limit reached too)
    await svc.check_template_room()
    tpl = await svc.copy(task, tid)
    tpl.settle_finished()  # (a fork is READY, its done event cleared: wait() blocked for ever
    # on the template, FINISHED by its status; session 53's review)
    await svc.put_template(tpl)
    return svc.reply(tpl, finished=True)


@router.post("/{task_id}/delete", response_model=TaskInfo,
             responses={**NOT_FOUND, 403: {"description": "Template without force=true"}})
async def delete(task_id: str, force: bool = Query(False, description="needed for templates"),
                 svc: TaskService = Depends(get_service)):
    try:
        task = await svc.get(task_id)
    except TaskUnreadable:  # a stored record that cannot be read can still be deleted
        task = None
    if (task.is_template if task else is_template_id(task_id)) and not force:
        raise HTTPException(403, "Templates are protected; delete with ?force=true")
    if task is not None and is_busy(task):
        task.stop()
    info = svc.info(task) if task else TaskInfo(task_id=task_id, generated_buf=0,
                                                 status=int(Status.FINISHED))
    try:
        await svc.store(svc.manager.delete_task_from_any_level, task_id, force=force)
    except TaskNotFound:  # deleted meanwhile by another request
        raise HTTPException(404, TASK_NOT_FOUND) from None
    return info
