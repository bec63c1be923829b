"""What the Task API routes do, apart from HTTP: prompts, parameters, submitting, looking up.

No tensors here. Store operations (``TaskManager`` calls, which may read or write SQLite) and
copies of task state run on a small pool of worker threads, so the event loop never blocks on the
database or on tensor copies. Long prompts are encoded off the event loop too.
"""

from __future__ import annotations

import asyncio
import secrets
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError

from server.api.bridge import round_lead
from server.api.encoding import encode as encode_text
from server.api.encoding import past_vocab, past_vocab_message
from server.api.response_format import (FieldError, new_constraints,
                                        grammar_off_loop, request_logit_bias,
                                        response_grammar)
from server.api.schemas.tasks import (MAX_TOKENS_LIMIT, GenerationParams, TaskInfo,
                                       TaskResponseModel, whole_number)
from server.api.stopping import RETRY_AFTER_S, ShuttingDown, finish_watched
from server.model.tokenizer import IncrementalDecoder
from server.scheduler import QueueFull
from server.scheduler.cycle import NONFINITE_ERROR
from server.task.cache_origin import origin_of
from server.task.manager import TaskNotFound, TemplateExists, TooManyTemplates
from server.task.manager import is_busy as is_busy  # re-exported for the routes
from server.task.policy import loader_mismatch
from server.task.state_templates import default_params
from server.task.task import Task, TaskHeld, new_task_id

STORE_THREADS = 4  # the TaskManager is thread-safe; a slow write must not stall every lookup
TASK_NOT_FOUND = "Task not found"
PIN_POLL_S = 0.01  # how often a stream checks whether a pinned task was submitted


def invalid(field: str, msg: str, value=None) -> RequestValidationError:
    """A 422 naming ``field`` of the body, in FastAPI's own error format."""
    return RequestValidationError([{"type": "value_error", "loc": ("body", field),
                                    "msg": msg, "input": value}])


def state_discarded(task: Task) -> bool:
    """A temporary task whose final state was not kept (it cannot be continued or forked)."""
    return not task.keep_state and task.is_finished


def check_resumable(task: Task) -> None:
    """409 unless the task is idle and still has its state (it can be continued or copied)."""
    if is_busy(task):
        raise HTTPException(409, f"Task {task.task_id} is running; stop it or wait until it "
                                 "has finished")
    if state_discarded(task):
        raise HTTPException(409, "A temporary task's state is not kept after it finishes; "
                                 "use a persistent task (POST /v1/tasks/create)")


def _fork(src: Task, new_id: str) -> Task:
    """``src.fork`` keeping where its state comes from (for the prefix cache)."""
    origin = origin_of(src)  # first: it may settle a template's state_decoded
    task = src.fork(new_id)
    task.cache_origin = origin
    return task


TRIAL_TOKENS = 8  # generated from an imported state before it is stored (TaskService.trial)


class TaskService:
    def __init__(self, runtime, drain=None):
        self.drain = drain  # the app's ``stopping.Drain``: streams say when it cut them short
        self.settings = runtime.settings
        self.loader = runtime.loader
        self.scheduler = runtime.scheduler
        self.manager = runtime.manager
        self.vocab_size = runtime.loader.cfg.vocab_size
        self._store = ThreadPoolExecutor(STORE_THREADS, thread_name_prefix="rwkv-store")

    def close(self) -> None:
        self._store.shutdown(wait=True)

    async def store(self, fn, *args, **kwargs):
        """Run a TaskManager call (or a state copy) on a store thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._store, lambda: fn(*args, **kwargs))

    # ---- prompts and parameters ------------------------------------------------------
    async def encode(self, prompt, field: str = "prompt", required: bool = True) -> list[int]:
        """Token ids of a text or token-id prompt; 422 if empty/out of range, 400 if too long.
        A list's length is checked before its items, so a million ids are refused at once."""
        if prompt is None or len(prompt) == 0:
            if required:
                raise invalid(field, "Prompt must not be empty", prompt)
            return []
        if not isinstance(prompt, str):
            self.check_prompt_length(len(prompt))
            ids = []
            for t in prompt:  # type(), not isinstance: JSON's true is a bool, an int too
                t = whole_number(t)  # 3.0 is 3, as for the integer parameters (README)
                if type(t) is not int:  # (not echoed: it may be any JSON, large or nested)
                    raise invalid(field, f"Token ids are integers, not {type(t).__name__}")
                if not 0 <= t < self.vocab_size:
                    raise invalid(field, f"Token id {t} is outside the vocabulary "
                                         f"[0, {self.vocab_size})", t)
                ids.append(t)
            return ids
        tokens = await encode_text(self.loader, prompt)
        self.check_prompt_length(len(tokens))
        bad = past_vocab(tokens, self.vocab_size)
        if bad is not None:
            raise invalid(field, past_vocab_message(bad, self.vocab_size), bad)
        return tokens

    def check_prompt_length(self, n_tokens: int, carried: int = 0) -> None:
        """400 when a request's prompt is over ``RWKV_MAX_PROMPT_TOKENS``. Its prompt is every
        token its task feeds before it generates: the ``n_tokens`` it sends and ``carried``,
        those the task it starts from has not fed yet (its ``pending``: a template imported
        from a state exported mid-prompt, a round that failed). Not the one token a finished
        round leaves for the next (``current_token``: any continuation feeds it first), which
        the limit never counted. Counted on the request's tokens only, a fork of a template
        holding 64 pending tokens could feed 64 more than the limit (a review, session 14)."""
        limit = self.settings.max_prompt_tokens
        if n_tokens + carried > limit:
            held = f" ({carried} of them not yet fed by the task it starts from)" if carried else ""
            raise HTTPException(400, f"Prompt is {n_tokens + carried} tokens{held}; the limit "
                                     f"is {limit} (RWKV_MAX_PROMPT_TOKENS)")

    def sampling(self, body: GenerationParams, defaults: bool) -> dict:
        """Task parameters from a body; with ``defaults`` absent fields take the settings'."""
        s = self.settings
        out = default_params(s) if defaults else {}
        out.update(body.sampling())
        if "seed" in body.model_fields_set and body.seed is None:
            out["seed"] = secrets.randbits(62)  # explicit null: a fresh random stream
        top = max(MAX_TOKENS_LIMIT, s.max_tokens_cap)  # the documented range, or the cap's
        if body.max_tokens is not None and body.max_tokens > top:
            raise invalid("max_tokens", f"Input should be less than or equal to {top}",
                          body.max_tokens)
        if "max_tokens" in out:  # (capped, as the OpenAI routes cap it)
            out["max_tokens"] = min(out["max_tokens"], s.max_tokens_cap)
        if out.get("top_k", 0) > self.vocab_size:
            out["top_k"] = self.vocab_size
        return out

    async def round_settings(self, body: GenerationParams) -> tuple[dict | None, object]:
        """``body``'s ``logit_bias`` (token id -> bias, or None) and ``response_format`` (a
        fresh ``Constraint``, or None) for the round the request starts: 422 naming either
        when unusable. Neither is stored with the task: a later round has them only if its
        request gives them."""
        try:
            bias = request_logit_bias(body.logit_bias, self.vocab_size)
        except FieldError as e:
            raise invalid("logit_bias", str(e), body.logit_bias) from None
        try:
            grammar = await grammar_off_loop(response_grammar, body.response_format)
        except FieldError as e:
            raise invalid("response_format", str(e), body.response_format) from None
        try:
            (constraint,) = await new_constraints(self.loader.tokenizer, grammar, 1)
        except FieldError as e:
            raise invalid("response_format", str(e), body.response_format) from None
        return bias, constraint

    def new_task(self, tokens: list[int], tmp: bool, params: dict) -> Task:
        task = Task(tokens, task_id=new_task_id("TMP" if tmp else "TASK"),
                    tokenizer=self.loader, **{"seed": None, **params})
        # a temporary task's state is thrown away unless it is all the task produces
        task.keep_state = not tmp or task.max_tokens == 0
        task.cache_origin = ""  # from the zero state: may use and feed the prefix cache
        return task

    def check_usable(self, task: Task) -> None:
        """``check_resumable``, and 409 unless the task's state fits the loaded model (a server
        restarted with another model on the same database can read the tasks stored before,
        not resume them)."""
        check_resumable(task)
        problem = loader_mismatch(task, self.loader)
        if problem:
            raise HTTPException(409, f"Task {task.task_id} does not fit the loaded model: "
                                     f"{problem}. It can be read and deleted, not continued, "
                                     "forked or exported")

    async def copy(self, src: Task, new_id: str) -> Task:
        """A copy of an idle task under ``new_id`` (state cloned off the event loop); 409 if it
        is running, its state was not kept or does not fit the loaded model."""
        self.check_usable(src)
        return await self.unheld(_fork, src, new_id)

    async def unheld(self, fn, src: Task, *args):
        """``fn(src, *args)`` (a copy of its state) off the event loop; 409 if ``src`` started
        meanwhile, as the copy may then mix two moments: held as it began (``TaskHeld``:
        ``Task.fork`` and ``export_state`` refuse a task a scheduler holds), running as it
        ended, or a whole round begun and ended during it (a continue with few tokens to
        feed: its round's output is another list; a review, session 49)."""
        this_round = src.round_output()
        try:
            out = await self.store(fn, src, *args)
        except TaskHeld:
            raise HTTPException(409, f"Task {src.task_id} is running; stop it or wait until "
                                     "it has finished") from None
        check_resumable(src)  # (running now)
        if src.round_output() is not this_round:
            raise HTTPException(409, f"Task {src.task_id} ran a round while it was being "
                                     "copied; nothing was copied: try again")
        return out

    async def check_template_room(self) -> None:
        """409 when ``RWKV_MAX_TEMPLATES`` templates are stored already (each one keeps a whole
        state in memory and on disk for ever: a client making them in a loop would fill both).
        Before a request reads or copies a state; ``put_template`` counts again as it stores."""
        limit = self.settings.max_templates
        if limit and await self.store(self.manager.store.count, True) >= limit:
            raise self._templates_full(limit)

    async def put_template(self, task: Task) -> None:
        """Store the new template ``task``; 409 when its id is taken or ``RWKV_MAX_TEMPLATES``
        are stored (counted by the TaskManager as it reserves the id, so two requests that both
        passed ``check_template_room`` cannot both store one over the limit)."""
        limit = self.settings.max_templates
        try:
            await self.store(self.manager.put_task, task.task_id, task, max_templates=limit)
        except TemplateExists:
            raise HTTPException(409, f"Template {task.task_id} exists; templates are never "
                                     "overwritten (delete it with force=true first)") from None
        except TooManyTemplates:
            raise self._templates_full(limit) from None

    async def trial(self, template: Task, request) -> str | None:
        """Generate ``TRIAL_TOKENS`` tokens from a copy of ``template``'s state (neither
        listed, stored nor cached; its prompt tokens not yet fed are fed first): the error if
        the state makes the model's output NaN or infinite, None if the tokens came. A state
        imported without such a check was stored, and every fork of it and every request
        naming it was a 500 (a QA report, session 71: values such as 1e20 pass the dtype's
        range check and overflow in the model); one that overflows only later still fails its
        requests so. A shutdown stops the trial (503, nothing stored), and so does the client
        leaving (``request``); another failure (a fault of the whole pulse) is a 500."""
        trial = await self.store(_fork, template, new_task_id("TMP"))
        trial.keep_state, trial.cache_origin = False, None  # (no cache entry of its state)
        fed = trial.current_token is not None or bool(trial.pending)
        trial.continue_gen(None if fed else [0], max_tokens=TRIAL_TOKENS, temperature=1.0,
                           top_k=1, presence_penalty=0.0, repetition_penalty=0.0)
        self.submit(trial)  # (503 on a full queue or a shutdown: nothing is stored)
        await finish_watched(trial, self.drain, request)
        if trial.finish_reason in ("stop", "length"):
            return None
        if trial.finish_reason == "error" and trial.error == NONFINITE_ERROR:
            return trial.error
        if self.drain is not None and self.drain.draining:
            raise ShuttingDown()
        if trial.finish_reason == "error":
            raise HTTPException(500, f"Trying the state failed: {trial.error}",
                                headers={"x-should-retry": "false"})
        raise HTTPException(400, "The client closed the request; nothing was stored")

    @staticmethod
    def _templates_full(limit: int) -> HTTPException:
        return HTTPException(409, f"the limit of {limit} templates (RWKV_MAX_TEMPLATES) is "
                                  "reached; delete some (force=true) first")

    # ---- submitting and looking up -------------------------------------------------------
    async def register(self, task: Task, pin: bool = False) -> None:
        """Put a task in the TaskManager (it writes persistent ones whenever they finish);
        ``pin``: kept in memory until ``unpin`` (a task about to be submitted)."""
        await self.store(self.manager.put_task, task.task_id, task, pin)

    async def unpin(self, task: Task) -> None:
        """Undo ``register``'s or ``get``'s pin: the task is submitted (held), or given up."""
        await self.store(self.manager.unpin, task.task_id)

    async def forget(self, task: Task) -> None:
        """Drop a task that was registered but could not be started."""
        try:
            await self.store(self.manager.delete_task_from_any_level, task.task_id, force=True)
        except TaskNotFound:
            pass

    @staticmethod
    def check_params(task: Task, changes: dict) -> None:
        """422 naming the parameter when ``task`` with ``changes`` would be refused by
        ``add_task`` (``Task.check_params``): a row an SDK script stored with, say, top_p=2.
        Checked before the task is changed: refused after ``continue_gen``, it was a 500 with
        the last round's output gone."""
        try:
            task.check_params(**changes)
        except ValueError as e:
            raise HTTPException(422, f"{e}; send a valid value with this request") from None

    def submit(self, task: Task) -> None:
        """Hand a task to the scheduler; 503 with Retry-After when its queue is full or the
        server is shutting down."""
        with self._busy_is_503():
            self.scheduler.add_task(task)

    def check_room(self) -> None:
        """503 (as ``submit``'s) unless the queue has room for one more task now: checked
        before a request changes a task it then submits (the room stays until the request's
        synchronous ``submit``: see ``BaseScheduler.check_room``)."""
        with self._busy_is_503():
            self.scheduler.check_room()

    @contextmanager
    def _busy_is_503(self):
        """503 with Retry-After for work the server cannot take now: a full queue, or a
        shutdown under way (a task submitted then was stopped at once, its stream cut)."""
        if self.drain is not None and self.drain.draining:
            raise ShuttingDown()
        try:
            yield
        except QueueFull as e:
            raise HTTPException(503, f"Server busy: {e}; retry shortly",
                                headers={"Retry-After": RETRY_AFTER_S}) from None

    async def submit_new(self, task: Task) -> None:
        await self.register(task, pin=True)
        try:
            self.submit(task)
        except Exception:  # (any: an unexpected one left the task listed, PREFILL for ever)
            await self.forget(task)
            raise
        finally:
            await self.unpin(task)

    async def get(self, task_id: str, pin: bool = False) -> Task:
        """The task with ``task_id`` (from the cache or the database); 404 if unknown.
        ``pin``: as ``register``'s (then ``unpin`` it)."""
        task = await self.store(self.manager.get_task, task_id, pin)
        if task is None:
            raise HTTPException(404, TASK_NOT_FOUND)
        return task

    async def check_running(self, task: Task) -> None:
        """409 for a task whose round is neither finished nor held by the scheduler: a row
        stored before its round ran (a server stopped meanwhile, or an SDK's ``put_task`` of a
        task never run), read back. Nothing will run it, so a stream of it stayed open for ever
        (session 53's review); ``continue`` runs it. One on its way there (pinned: a continue's
        checks, a new task's submit) is waited for: a continue refused then (a 400, a 503)
        leaves it as it was, and a stream let through on the pin stayed open until something
        ran the task (session 54's note)."""
        while not (task.is_finished or task.held) and self.manager.is_pinned(task.task_id):
            await asyncio.sleep(PIN_POLL_S)  # (a pin lasts a request's checks: milliseconds)
        if task.is_finished or task.held:
            return
        raise HTTPException(409, f"task {task.task_id} is not running and not finished: its "
                                 "round was stored before it ran (the server stopped "
                                 f"meanwhile); POST /v1/tasks/{task.task_id}/continue runs it")

    # ---- replies ---------------------------------------------------------------------------
    def result(self, task: Task) -> TaskResponseModel:
        """The round's text so far (an incomplete trailing character is held back until done;
        one the round began inside shows when the round completes it: ``round_lead``)."""
        tokens, finished = task.tokens_of_round(task.round_output())  # (over read first: a
        # round seen finished has all its tokens; read after them, the last pulse's could be
        # missing from a reply marked finished: a review, session 49)
        if task.finish_reason == "error":  # (after: an error finish is known once it is over)
            raise HTTPException(500, f"Generation failed: {task.error}")
        tok = self.loader.tokenizer
        dec = IncrementalDecoder(tok, round_lead(tok, task.round_lead, tokens), shown=True)
        text = dec.feed(tokens) + (dec.flush() if finished else "")
        return self.reply(task, text, finished, len(tokens))

    @staticmethod
    def reply(task: Task, text: str = "", finished: bool | None = None,
              n_tokens: int = 0) -> TaskResponseModel:
        gen = float(task.gen_time)
        return TaskResponseModel(
            task_id=task.task_id, result=text, prefill_time=float(task.prefill_time),
            gen_time=gen, speed=n_tokens / gen if gen > 0 else 0.0,
            finished=task.is_finished if finished is None else finished)

    @staticmethod
    def info(task: Task) -> TaskInfo:
        status = int(task.status)  # (first: a finished status never shows a short count)
        return TaskInfo(task_id=task.task_id, generated_buf=len(task.round_tokens()),
                        status=status)
