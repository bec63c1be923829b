"""OpenAI-compatible routes: ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions``.

Parameter mapping onto the RWKV sampler (API.md §1 penalties: the first time a token is sampled its
penalty grows by ``presence``, each later time by ``repetition``):

- ``presence_penalty`` p and ``frequency_penalty`` f (OpenAI: ``p·[count>0] + f·count``) become
  ``presence = p + f`` and ``repetition = f``, which is the same penalty while ``penalty_decay`` is
  1; negative values count as 0 (RWKV penalties only push away) and each result is capped at 10.
  Absent fields take ``RWKV_DEFAULT_PRESENCE_PENALTY`` P / ``RWKV_DEFAULT_REPETITION_PENALTY`` R
  in OpenAI's terms (p = P - R, f = R): a request with neither gets the Task API's sampler.
- ``max_completion_tokens`` (preferred) or ``max_tokens``, else ``RWKV_DEFAULT_MAX_TOKENS``; capped
  at ``RWKV_MAX_TOKENS_CAP``. ``temperature``, ``top_p`` as OpenAI; ``top_k`` and ``penalty_decay``
  are RWKV extensions. ``seed``: choice ``i`` of ``n`` uses ``seed + i``.
- ``logprobs``: chat ``logprobs: true`` with ``top_logprobs`` 0-20 alternatives, completions
  ``logprobs`` 0-5 (``false``/``null``: none); the model's own distribution before penalties
  and temperature (``logprob_format.py``); with ``echo`` the prompt is scored too
  (``BaseScheduler.score``; a job takes a queue place), not from a state template nor with a
  ``suffix``.
- ``logit_bias``: token id -> bias in [-100, 100], added to the logits before sampling (the
  log probabilities stay the model's own); at most 300 entries (``_logit_bias``).
- ``response_format``: ``json_object`` / ``json_schema`` constrain the reply to JSON
  (``response_format.py``; each task gets its own grammar state, ``Task.constraint``).
  ``best_of`` only checks ``best_of >= n`` (choices are not ranked) and is refused with
  ``stream``. Any ``model`` id is served by the loaded model and echoed back.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import aclosing

import anyio
from fastapi import APIRouter, Request
from sse_starlette.sse import EventSourceResponse, ServerSentEvent

from server.api.chat import (ANSWER_LEAD, ChatError, build_chat_prompt, fim_prompt,
                             history_text, wants_think)
from server.api.bridge import UnderWay
from server.api.completion import Choice, cut_message, make_tasks, run_choices, submit
from server.api.deps import get_runtime
from server.api.encoding import encode, past_vocab, past_vocab_message
from server.api.prefix import ALIAS, find_template, prepare_tasks
from server.api.response_format import (FieldError, new_constraints,
                                        grammar_off_loop, request_logit_bias,
                                        response_grammar)
from server.api.routes.openai_format import (Reply, chat_body, chat_events, chat_message,
                                             completion_body, completion_events, error_event)
from server.api.routes.openai_schemas import (MAX_CHOICES, ChatRequest, CompletionRequest,
                                              OpenAIError, off_loop_if_big, parse_request)
from server.api.safe_json import SafeJSONResponse, utf8_safe
from server.api.splitter import OutputSplitter
from server.api.stopping import client_gone, stop_in_background
from server.api.task_stream import SHUTDOWN_GRACE_S
from server.api.tools import (choice_name, forced_call_grammar, forced_tool, forces_call,
                              parse_tools, tools_active)
from server.logger import get_logger
from server.model.tokenizer import incomplete_tail
from server.scheduler import QueueFull
from server.scheduler.scoring import ScoringStopped

# strict JSON whatever a reply holds (a NaN log probability was a 500; session 66's QA). Not
# the app's default: the Task API's routes (response models) keep pydantic's own JSON writer
log = get_logger("api")
router = APIRouter(tags=["openai"], default_response_class=SafeJSONResponse)
PING_SECONDS = 15
COMPLETION_TOP_MAX = 5  # OpenAI's limit of the completions' ``logprobs``
STARTED = int(time.time())  # "created" of a model whose file is gone (demo weights)


def _body_doc(model) -> dict:
    """The OpenAPI request body of a route that reads its own JSON (for /docs and fuzzing)."""
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": model.model_json_schema()}}}}


_ERROR = {"content": {"application/json": {"schema": {
    "type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["message", "type", "param", "code"], "properties": {
            "message": {"type": "string"}, "type": {"type": "string"},
            "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}}}}}


def _replies(what: str) -> dict:
    """The OpenAPI responses of a generating route: its JSON or, with ``stream``, its events;
    errors in OpenAI's shape (the schema said a JSON string and no error; a fuzzing helper,
    session 49)."""
    return {200: {"description": f"The {what}; with \"stream\": true, server-sent events "
                                 "(`data: <chunk JSON>`, then `data: [DONE]`)",
                  "content": {"application/json": {"schema": {"type": "object"}},
                              "text/event-stream": {"schema": {"type": "string"}}}},
            400: {"description": "Bad request, naming the parameter", **_ERROR},
            401: {"description": "Missing or wrong API key", **_ERROR},
            500: {"description": "The generation failed (x-should-retry: false)", **_ERROR},
            503: {"description": "Busy or shutting down (Retry-After)", **_ERROR}}


def _clamp(x: float) -> float:
    return min(max(x, 0.0), 10.0)


def sampling_params(req, s) -> dict:
    """Task parameters from a request and the settings ``s`` (see the module docstring)."""
    max_tokens = next((v for v in (req.max_completion_tokens, req.max_tokens) if v is not None),
                      s.default_max_tokens)
    # the defaults are the RWKV sampler's (the Task API's), in OpenAI's terms: a request naming
    # neither penalty gets that sampler; they were taken as p and f, and presence came out as
    # their sum (2.5 where the Task API had 2 with RWKV_DEFAULT_REPETITION_PENALTY=0.5)
    rep = s.default_repetition_penalty
    p = s.default_presence_penalty - rep if req.presence_penalty is None else \
        max(req.presence_penalty, 0)
    f = rep if req.frequency_penalty is None else max(req.frequency_penalty, 0)
    pick = lambda v, d: d if v is None else v  # noqa: E731
    return dict(max_tokens=min(max_tokens, s.max_tokens_cap),
                temperature=pick(req.temperature, s.default_temperature),
                top_p=pick(req.top_p, s.default_top_p), top_k=pick(req.top_k, s.default_top_k),
                min_p=pick(req.min_p, s.default_min_p),
                presence_penalty=_clamp(p + f), repetition_penalty=_clamp(f),
                penalty_decay=pick(req.penalty_decay, s.default_penalty_decay))


def _check_length(n_tokens: int, limit: int, what: str, tpl=None) -> None:
    """400 ``context_length_exceeded`` past ``RWKV_MAX_PROMPT_TOKENS``. The tokens a state
    template ``tpl`` has not fed yet count too: every choice feeds them first (as
    ``TaskService.check_prompt_length`` counts them for forks)."""
    carried = 0 if tpl is None else len(tpl.pending)
    if n_tokens + carried > limit:
        note = f" with the {carried} that state template {tpl.task_id} has not fed yet" \
            if carried else ""
        raise OpenAIError(400, f"This model's maximum context length is {limit} tokens "
                          f"(RWKV_MAX_PROMPT_TOKENS). However, your {what} resulted in "
                          f"{n_tokens + carried} tokens{note}. Please reduce the length of the "
                          f"{what}.",
                          param="messages" if what == "messages" else "prompt",
                          code="context_length_exceeded")


def _check_vocab(tokens: list[int], rt, param: str) -> None:
    vocab = rt.loader.cfg.vocab_size
    bad = past_vocab(tokens, vocab)
    if bad is not None:
        raise OpenAIError(400, past_vocab_message(bad, vocab), param=param)


def _logit_bias(req, rt) -> dict[int, float] | None:
    """The request's ``logit_bias`` as token id -> bias (None: none), or a 400 naming it."""
    try:
        return request_logit_bias(req.logit_bias, rt.loader.cfg.vocab_size)
    except FieldError as e:
        raise OpenAIError(400, str(e), param="logit_bias") from None


async def _grammar(req, lead: str | None = None) -> str | None:
    """The grammar of the request's ``response_format`` (None: free text) after ``lead``, or
    a 400 (compiled off the event loop: ``response_format.grammar_off_loop``)."""
    try:
        return await grammar_off_loop(response_grammar, req.response_format, lead)
    except FieldError as e:
        raise OpenAIError(400, str(e), param="response_format") from None


async def _constrain(rt, tasks, grammar: str | None, param: str) -> None:
    """Each task's own state of ``grammar`` (none: None), or a 400 naming ``param``."""
    try:
        made = await new_constraints(rt.loader.tokenizer, grammar, len(tasks))
    except FieldError as e:
        raise OpenAIError(400, str(e), param=param) from None
    for task, constraint in zip(tasks, made):
        task.constraint = constraint


def _check_choices(rt, count: int) -> None:
    """400 for more choices than the scheduler ever takes at once: never "busy" (a 503 that
    no retry ends), a request to change."""
    sched = rt.scheduler
    if count > sched.max_in_flight:
        raise OpenAIError(400, f"{count} choices (prompts × n) are more than this server "
                          f"takes at once ({sched.max_in_flight}: RWKV_MAX_BATCH_SIZE="
                          f"{sched.max_batch_size} + RWKV_MAX_QUEUE={sched.max_queue}); ask "
                          "for fewer", param="n")


async def _submit(request: Request, rt, tasks, stream: bool, arrived: float) -> None:
    """Enqueue the request's tasks (503 if the queue is full or the server is shutting down).
    For a stream, return once the first is under way (``UnderWay``): its response is built
    while the device computes. ``arrived``: the request's ``time.perf_counter()`` at its
    start (``Task.arrived``: its wait before the queue, a prompt's scoring, counts too)."""
    if request.app.state.drain.draining:
        raise _shutting_down("The server is shutting down; retry shortly.")
    _check_choices(rt, len(tasks))
    for task in tasks:
        task.arrived = arrived
    started = UnderWay(tasks[0]) if stream else None
    try:
        submit(rt.scheduler, tasks)
    except QueueFull as e:
        raise _busy(e) from None
    if started is not None:
        await started.wait()


def _head(tpl) -> int:
    """The tokens a state template ``tpl`` (None: none) holds but has not fed: each choice
    feeds them before its prompt, so ``usage.prompt_tokens`` counts them (once per prompt)."""
    return 0 if tpl is None else len(tpl.unfed())


def _reply(rt, req, prefix: str, prompt_tokens: int) -> Reply:
    model = utf8_safe(req.model or rt.model_name)  # echoed: never a lone surrogate
    return Reply(f"{prefix}-{secrets.token_hex(12)}", int(time.time()), model, prompt_tokens,
                 req.include_usage)


def _busy(e: QueueFull) -> OpenAIError:
    """503 ``server_busy`` with ``Retry-After`` (the queue is full)."""
    return OpenAIError(503, f"The server is busy ({e}); retry shortly.", type="server_error",
                       code="server_busy", headers={"Retry-After": "1"})


def _shutting_down(message: str) -> OpenAIError:
    """503 ``server_shutting_down`` with ``Retry-After``: the SDKs retry it (OPENAI_COMPAT
    13), which is what a client of a restarting server wants."""
    return OpenAIError(503, message, type="server_error", code="server_shutting_down",
                       headers={"Retry-After": "1"})


def _sse(events, choices: list[Choice], drain, jobs=()) -> EventSourceResponse:
    """``data: <json>\\n\\n`` events only; keep-alives are ``: ping`` comments. A client that
    disconnects stops the tasks at once (the generator's own clean-up stops them too). When the
    server shuts down, ``drain`` (the app's ``Drain``) stops the tasks, so the stream ends within
    ``SHUTDOWN_GRACE_S``: the text so far, then an error event saying the reply was cut short
    (``openai_format``), never a ``finish_reason`` and ``[DONE]`` that would pass it as whole."""
    async def on_close(_message) -> None:
        stop_in_background([c.task for c in choices])
        _cancel_jobs(jobs)  # (prompts still being scored)

    shutdown = anyio.Event()  # sse-starlette's own signal (also a server without run.py's)

    async def stop_on_shutdown() -> None:  # (choices: filled later where a prompt is scored)
        await drain.stop_when_draining(lambda: [c.task for c in choices], also=shutdown)

    return EventSourceResponse(events, sep="\n", ping=PING_SECONDS,
                               ping_message_factory=lambda: ServerSentEvent(comment="ping", sep="\n"),
                               headers={"Cache-Control": "no-cache"},
                               client_close_handler_callable=on_close,
                               shutdown_event=shutdown, shutdown_grace_period=SHUTDOWN_GRACE_S,
                               data_sender_callable=stop_on_shutdown)


async def _watch_disconnect(request: Request, choices: list[Choice]) -> None:
    await client_gone(request)
    stop_in_background([c.task for c in choices])


async def _run_to_end(request: Request, rt, choices: list[Choice]) -> None:
    """Non-stream: run every choice to its end; a client that leaves stops the tasks, and so
    does a shutdown (``Drain``), answered 503 ``server_shutting_down`` naming the cut (a 200
    with the text so far passed a truncated reply as whole)."""
    tasks = [c.task for c in choices]
    drain = request.app.state.drain
    watchers = [asyncio.create_task(_watch_disconnect(request, choices)),
                asyncio.create_task(drain.stop_when_draining(tasks))]
    try:
        async for _ in run_choices(choices, rt.loader.tokenizer, drain):
            pass  # each choice collects its pieces
    finally:
        for w in watchers:
            w.cancel()
    failed = [c.error for c in choices if c.error]
    if failed:
        # not retried: the SDKs retry a 500 twice, each a whole generation again (OPENAI_COMPAT
        # 13); both openai-python and openai-node obey x-should-retry before the status
        raise OpenAIError(500, f"Generation failed: {failed[0]}", type="server_error",
                          code="generation_error", headers={"x-should-retry": "false"})
    cut = cut_message(choices)
    if cut is not None:
        raise _shutting_down(cut)


def _openai_errors(handler):
    """Answer ``OpenAIError`` in OpenAI's shape (never FastAPI's ``{"detail": …}``)."""
    async def wrapped(request: Request):
        try:
            return await handler(request)
        except OpenAIError as e:
            return e.response()
    wrapped.__name__ = handler.__name__
    wrapped.__doc__ = handler.__doc__
    return wrapped


# ---- models ----------------------------------------------------------------------------------
def _model_cards(rt) -> list[dict]:
    path = getattr(rt.loader, "model_path", None)
    try:
        created = int(os.path.getmtime(path))
    except (TypeError, OSError):
        created = STARTED
    names = [rt.model_name] + ([ALIAS] if rt.model_name != ALIAS else [])
    return [{"id": n, "object": "model", "created": created, "owned_by": "rwkv"} for n in names]


@router.get("/v1/models")
async def list_models(request: Request):
    """The loaded model (named after its file), the alias ``rwkv-7``, then ``rwkv-7:_name`` for
    each state template the loaded model can use (chat and completions start from its state):
    clients that pick a model from this list (Open WebUI, LobeChat, Chatbox) reach them too."""
    rt = get_runtime(request)
    cards = _model_cards(rt)
    ids = await asyncio.to_thread(rt.manager.template_ids, rt.loader.cfg)
    return {"object": "list", "data": cards + [{**cards[0], "id": f"{ALIAS}:{tid}"}
                                               for tid in ids]}


@router.get("/v1/models/{model_id}", responses={404: {"description": "Unknown model id",
                                                      **_ERROR}})
async def retrieve_model(model_id: str, request: Request):
    """A listed model, or ``<model>:_name`` naming a stored state template (chat and completions
    accept that id: the loaded model, starting from the template's state); a template they
    would refuse (stored with another model, still being built) is refused here alike."""
    rt = get_runtime(request)
    cards = _model_cards(rt)
    for card in cards:
        if card["id"] == model_id:
            return card
    try:
        if await find_template(rt, model_id) is not None:
            return {**cards[0], "id": model_id}
    except OpenAIError as e:
        return e.response()
    return OpenAIError(404, f"The model '{model_id}' does not exist", param="model",
                       code="model_not_found").response()


# ---- chat --------------------------------------------------------------------------------------
@router.post("/v1/chat/completions", openapi_extra=_body_doc(ChatRequest),
             responses=_replies("chat completion"))
@_openai_errors
async def chat_completions(request: Request):
    """OpenAI chat completion over the RWKV g1 chat prompt (see ``server.api.chat``)."""
    arrived = time.perf_counter()  # (time to first token counts from here: ``_submit``)
    rt = get_runtime(request)
    req = await parse_request(request, ChatRequest)
    if req.top_logprobs is not None and not req.logprobs:
        raise OpenAIError(400, "top_logprobs needs logprobs: true", param="top_logprobs")
    _check_choices(rt, req.n or 1)  # (before any grammar, task or state is made for them)
    try:
        tools = parse_tools(req.tools)
        choice_name(req.tool_choice)  # its form, with tools or without (then it is unused)
        offer = tools_active(tools, req.tool_choice)
        forced = forced_tool(req.tool_choice, tools) if offer else None
        names = {forced} if forced else {t.name for t in tools}  # calls a client can dispatch
        grammar = await _grammar(req, ANSWER_LEAD)  # (a constrained reply has no reasoning)
        if grammar is not None and offer:
            raise OpenAIError(400, "response_format and tools cannot be used together: a "
                              "reply either calls a tool or answers in the format",
                              param="response_format")
        if forces_call(tools, req.tool_choice):  # a forced call is constrained (a worker
            # thread compiles its grammar; "auto" has none: no hop)
            grammar = await grammar_off_loop(forced_call_grammar, tools, req.tool_choice,
                                             ANSWER_LEAD)
        # (a constrained reply is the answer alone: no reasoning before it)
        think = grammar is None and wants_think(req.reasoning_effort, rt.settings.chat_think)
        prompt = await off_loop_if_big(request, build_chat_prompt, req.messages, think,
                                       tools if offer else None, req.tool_choice)
    except ChatError as e:
        raise OpenAIError(400, e.message, param=e.param) from None
    tokens = await encode(rt.loader, prompt)
    tpl = await find_template(rt, req.model)  # "rwkv-7:_template"
    _check_length(len(tokens), rt.settings.max_prompt_tokens, "messages", tpl)
    _check_vocab(tokens, rt, "messages")
    params = sampling_params(req, rt.settings)
    bias = _logit_bias(req, rt)
    tasks = make_tasks(tokens, req.n or 1, params, req.seed,
                       logprobs=(req.top_logprobs or 0) if req.logprobs else None,
                       logit_bias=bias)
    await _constrain(rt, tasks, grammar, "tools" if offer else "response_format")
    await prepare_tasks(rt, tpl, tasks, finish=False)  # prefix cache; the template's state
    inline = rt.settings.chat_inline_think
    choices = [Choice(i, t, OutputSplitter("think" if think else "direct", req.stop_list,
                                           tools=offer, inline_think=inline, tool_names=names,
                                           one_call=req.parallel_tool_calls is False))
               for i, t in enumerate(tasks)]
    if len(choices) == 1 and rt.settings.chat_warm_next_turn:
        choices[0].on_finish = _warm_next_turn(rt, req, tools if offer else None, tasks[0], tpl)
    await _submit(request, rt, tasks, req.stream, arrived)
    reply = _reply(rt, req, "chatcmpl", len(tokens) + _head(tpl))
    if req.stream:
        drain = request.app.state.drain
        return _sse(chat_events(reply, choices, rt.loader.tokenizer, drain), choices, drain)
    await _run_to_end(request, rt, choices)
    return SafeJSONResponse(chat_body(reply, choices, rt.loader.tokenizer))


def _warm_next_turn(rt, req, tools, task, tpl):
    """A chat choice's ``on_finish``: the conversation's history with this reply, as a client
    re-sends it in the next request, goes to the prefix cache (computed when the scheduler has
    time), so the next turn prefills only its new message. Not for tool calls (a client's
    rendering of them is its own). From a template (``tpl``), the template's tokens come first
    and the state is keyed by its origin (``task.cache_origin``), as the next turn's is."""
    origin = task.cache_origin

    async def warm(choice: Choice) -> None:
        if choice.finish_reason == "tool_calls":
            return
        if choice.task.stop_requested and not choice.splitter.stopped:
            return  # cut short (client gone, shutdown): the client will not re-send it
        text = history_text(list(req.messages) + [chat_message(choice)], tools, req.tool_choice)
        tokens = await encode(rt.loader, text)  # reuses the prompt's tokens
        head = [] if tpl is None else list(tpl.history) + tpl.unfed()
        try:
            rt.scheduler.warm_prefix(origin, head + tokens)
        except ValueError:  # ids the model lacks (a checkpoint with a smaller vocabulary than
            pass  # the tokenizer's): the next turn, re-sending them, is refused as any prompt
    return warm


# ---- completions -------------------------------------------------------------------------------
def _all_text(prompt) -> bool:
    """Whether a completion request's ``prompt`` is text only (a string, or strings), not ids."""
    return isinstance(prompt, str) or all(isinstance(p, str) for p in prompt)


async def _prompt_tokens(rt, prompt, n: int, tpl=None,
                         suffix: str | None = None) -> list[tuple[str | None, list[int]]]:
    """``(text, tokens)`` per prompt (``text`` None for token ids, decoded only to be echoed):
    a string, strings, token ids or lists of token ids; 400 before any encoding when the
    prompts × ``n`` choices are too many, and when a prompt is too long (``_check_length``; a
    list of ids before its ids are checked: a million took ~0.2 s to decode). ``suffix``: each
    (text) prompt is the prefix of a fill-in-the-middle prompt (``fim_prompt``) whose tokens
    are returned with the prompt's own text."""
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        prompt = [prompt]
    if not prompt:
        raise OpenAIError(400, "prompt must not be an empty list", param="prompt")
    if len(prompt) * n > MAX_CHOICES:
        raise OpenAIError(400, f"at most {MAX_CHOICES} choices per request (prompts × n)",
                          param="n")
    if suffix is not None and not _all_text(prompt):
        raise OpenAIError(400, "suffix needs text prompts: a prompt of token ids cannot be "
                          "placed before it", param="suffix")
    vocab, limit = rt.loader.cfg.vocab_size, rt.settings.max_prompt_tokens
    out = []
    for i, p in enumerate(prompt):
        if isinstance(p, str):
            tokens = await encode(rt.loader, fim_prompt(p, suffix) if suffix is not None else p)
            _check_length(len(tokens), limit, "prompt", tpl)
            _check_vocab(tokens, rt, "prompt")
            out.append((p, tokens))
            continue
        _check_length(len(p), limit, "prompt", tpl)
        if any(t < 0 or t >= vocab for t in p):
            raise OpenAIError(400, f"prompt {i} has token ids outside 0..{vocab - 1}",
                              param="prompt")
        out.append((None, list(p)))  # (its text: ``_echo``)
    return out


def _echo(rt, text: str | None, tokens: list[int]) -> tuple[str, bytes]:
    """``(text, lead)`` of an echoed prompt (``text`` None: token ids). A prompt of token ids
    that ends inside a character echoes the text before it, and the reply's decoder starts from
    its bytes (``lead``): echo and reply are one document, and "A" + the first bytes of 中 then
    the last one came back as "A\ufffd\ufffdB" (session 42's QA)."""
    if text is not None:
        return utf8_safe(text), b""
    data = rt.loader.tokenizer.decode_bytes(tokens)
    lead = incomplete_tail(data)
    return data[:len(data) - len(lead)].decode("utf-8", errors="replace"), lead


def _completion_logprobs(req) -> int | None:
    """A completion request's alternatives per token (None: no log probabilities): an
    integer 0-5 as OpenAI's."""
    lp = req.logprobs
    if lp is None or lp is False:
        return None
    if lp is True or not 0 <= lp <= COMPLETION_TOP_MAX:
        raise OpenAIError(400, "logprobs is how many alternatives each token lists: an integer "
                          f"from 0 to {COMPLETION_TOP_MAX}", param="logprobs")
    return lp


def _score_job(rt, tokens: list[int], top: int):
    """Queue the scoring of an echoed prompt's tokens on the scheduler's thread
    (``BaseScheduler.score``): its future, None for no tokens; 503 when the queue is full or
    the server is shutting down."""
    if not tokens:
        return None
    try:
        return rt.scheduler.score(tokens, top)
    except QueueFull as e:
        raise _busy(e) from None
    except ScoringStopped as e:
        raise _shutting_down(f"The server is shutting down ({e}); retry shortly.") from None


async def _scored(request: Request, job, tokens: list[int]) -> list:
    """``job``'s (``_score_job``'s) ``(token, entry)`` pairs, the first token's entry None (it
    follows nothing). A client that leaves cancels the job (dropped at its next pass), and so
    does the server's shutdown (503)."""
    if job is None:
        return []
    drain = request.app.state.drain
    scored = asyncio.wrap_future(job)
    ends = [asyncio.ensure_future(drain.event.wait()),
            asyncio.ensure_future(client_gone(request))]
    try:
        await asyncio.wait([scored, *ends], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for end in ends:
            end.cancel()
        if not scored.done():
            job.cancel()  # (the scheduler drops it)
    if not scored.done():
        if drain.draining:
            raise _shutting_down("The server is shutting down; retry shortly.")
        raise OpenAIError(400, "The client closed the request.")
    try:
        entries = scored.result()
    except ScoringStopped as e:
        raise _shutting_down(f"The server is shutting down ({e}); retry shortly.") from None
    except Exception as e:
        raise OpenAIError(500, f"Scoring the prompt failed: {type(e).__name__}: {e}",
                          type="server_error", code="generation_error",
                          headers={"x-should-retry": "false"}) from None
    return list(zip(tokens, [None] + entries))


def _score_jobs(request: Request, rt, prompts, top: int) -> list:
    """``_score_job`` for each prompt, all queued at once; none left queued if one is refused.
    503 while the server is shutting down."""
    if request.app.state.drain.draining:
        raise _shutting_down("The server is shutting down; retry shortly.")
    jobs = []
    try:
        for _, toks in prompts:
            jobs.append(_score_job(rt, toks, top))
    except BaseException:
        _cancel_jobs(jobs)
        raise
    return jobs


def _cancel_jobs(jobs) -> None:
    """Cancel ``_score_job``'s scoring jobs not yet done (None: a prompt of no tokens); the
    scheduler drops each at its next pass."""
    for job in jobs:
        if job is not None and not job.done():
            job.cancel()


async def _after(begun, events) -> AsyncIterator[str]:
    """A stream's ``events`` once ``begun`` (its prompts scored, its choices submitted) has
    ended, or an error event if it failed (the status line went out already)."""
    try:
        await begun
    except OpenAIError as e:
        yield error_event(e.message, e.code or "generation_error", e.type, e.param)
        return
    except Exception as e:  # (as the app's own 500: never a stream cut without a word)
        log.opt(exception=e).error(f"Starting a scored completion's stream failed: {e!r}")
        yield error_event(f"Internal server error: {type(e).__name__}", "internal_error")
        return
    async with aclosing(events) as ev:
        async for event in ev:
            yield event


@router.post("/v1/completions", openapi_extra=_body_doc(CompletionRequest),
             responses=_replies("completion"))
@_openai_errors
async def completions(request: Request):
    """OpenAI (legacy) text completion: the prompt is continued as is."""
    arrived = time.perf_counter()  # (time to first token counts from here: ``_submit``)
    rt = get_runtime(request)
    req = await parse_request(request, CompletionRequest)
    n = req.n or 1
    logprobs = _completion_logprobs(req)
    if req.best_of is not None and req.best_of > 1 and req.stream:
        raise OpenAIError(400, "best_of cannot be used with stream", param="best_of")
    if req.best_of is not None and req.best_of < n:
        raise OpenAIError(400, "best_of must be greater than or equal to n", param="best_of")
    tpl = await find_template(rt, req.model)  # "rwkv-7:_template"
    # a suffix (even "": the end of a file) makes it fill-in-the-middle, as /v1/tasks/fim: code,
    # which no new turn of the chat format ends (session 41's QA); an empty one beside token
    # ids is no suffix (ids cannot be placed before one; it was accepted so before)
    suffix = None if req.suffix == "" and not _all_text(req.prompt) else req.suffix
    fim = suffix is not None
    prompts = await _prompt_tokens(rt, req.prompt, n, tpl, suffix)
    scored = req.echo and logprobs is not None  # the prompt's tokens get theirs too
    if scored and tpl is not None:
        raise OpenAIError(400, "echo with logprobs does not start from a state template: "
                          "the template's tokens would need theirs", param="echo")
    if scored and suffix is not None:
        raise OpenAIError(400, "echo with logprobs scores a prompt as it is given; with a "
                          "suffix the model reads a fill-in-the-middle prompt instead",
                          param="suffix")
    params = sampling_params(req, rt.settings)
    bias = _logit_bias(req, rt)
    grammar = await _grammar(req)
    _check_choices(rt, len(prompts) * n)  # (before any prompt is scored)
    choices = []
    # an empty prompt starts a document (token 0), or goes on from a template's next token
    start = [] if tpl is not None and tpl.unfed() else [0]
    reply = _reply(rt, req, "cmpl", sum(len(t or start) + _head(tpl) for _, t in prompts))

    async def begin(jobs) -> None:
        """Score the echoed prompts (``jobs``), then make, prepare and submit the choices."""
        try:
            for i, ((text, toks), job) in enumerate(zip(prompts, jobs)):
                tasks = make_tasks(toks or start, n, params, req.seed, stop_at_turn=not fim,
                                   logprobs=logprobs, logit_bias=bias)
                echo, lead = _echo(rt, text, toks) if req.echo else ("", b"")
                head = await _scored(request, job, toks) if scored else None
                choices.extend(Choice(i * n + j, t, OutputSplitter("text", req.stop_list,
                                                                    boundary=not fim),
                                      echo=echo, lead=lead, echo_logprobs=head)
                               for j, t in enumerate(tasks))
        finally:  # (a prompt refused, the client gone: the later prompts' jobs go too)
            _cancel_jobs(jobs)
        await _constrain(rt, [c.task for c in choices], grammar, "response_format")
        await prepare_tasks(rt, tpl, [c.task for c in choices])  # prefix cache; the template
        await _submit(request, rt, [c.task for c in choices], req.stream, arrived)

    if not (req.stream and scored):
        await begin(_score_jobs(request, rt, prompts, logprobs) if scored
                    else [None] * len(prompts))
        if not req.stream:
            await _run_to_end(request, rt, choices)
            return SafeJSONResponse(completion_body(reply, choices, rt.loader.tokenizer))
        drain = request.app.state.drain
        return _sse(completion_events(reply, choices, rt.loader.tokenizer, drain), choices,
                    drain)
    # streamed with the prompt scored: the stream starts (headers, keep-alives) while the
    # prompts are scored, which can take long (a silent 34 s for a 30,000-word prompt on a
    # CPU, session 71's QA); the jobs are queued first (a full queue or a shutdown is a 503
    # as for any request), later failures an error event in the stream
    jobs = _score_jobs(request, rt, prompts, logprobs)
    drain = request.app.state.drain
    return _sse(_after(begin(jobs), completion_events(reply, choices, rt.loader.tokenizer,
                                                       drain)), choices, drain, jobs)
