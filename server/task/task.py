"""Task: one sequence's lifecycle, tokens, sampling parameters and recurrent state.

Status: ``PREFILL -> READY -> RUNNING -> FINISHED``, and ``FINISHED -> READY`` via ``continue_gen()``.

Token convention (the invariant everything relies on): the recurrent ``state`` has consumed every
token of the sequence *except* ``current_token``, which is the next input of the model. After a
prompt is prefilled, ``current_token`` is the prompt's last token; after generation it is the last
sampled token (``None`` when generation ended on an end-of-text/new-turn token, which is neither
returned nor fed). ``pending`` holds prompt tokens appended but not yet fed.

While a task is not in a slot its state lives on the CPU (``state``: a ``State`` of batch 1,
``penalties``: ``[V]`` float32 or ``None`` for all zeros). The scheduler thread is the only writer
of tokens, state and status while the task is in flight; other threads read and call ``stop()``.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
import secrets
import threading
import time
from enum import IntEnum
from typing import Callable

from loguru import logger


class TaskHeld(RuntimeError):
    """The task is queued, running or finishing in a scheduler: it cannot be changed or
    copied now."""


# ``owner`` is set on a scheduler's own threads (the daemon, a run() caller while it steps, the
# copy-back thread) to that scheduler: the task callbacks run there, and ``Task.wait`` must not
# block them for a task only that scheduler could finish
SCHEDULER_THREAD = threading.local()
# tokens kept before a round's output (``Task.round_lead``): a UTF-8 character left incomplete
# there has at most 3 bytes, and every id holds at least one but a few that hold none (0 and
# the vocabulary's last ones)
LEAD_TOKENS = 4

SAMPLING_FIELDS = (
    "max_tokens", "temperature", "top_p", "top_k",
    "presence_penalty", "repetition_penalty", "penalty_decay", "seed", "min_p",
)

# what each sampling parameter may be: (an integer?, lowest, highest; None = unbounded). Integers
# must fit the slot tensors (top_k is int32, max_tokens int64; a seed keeps its low 64 bits);
# numbers must be finite. The SDK checks them in ``add_task`` (``Task.check_params``): unchecked,
# a top_k past int64 failed every task of the step and a NaN temperature sampled garbage.
PARAM_RANGES = {
    "max_tokens": (True, 0, 2**63 - 1), "top_k": (True, -1, 2**31 - 1),  # (-1, 0: off)
    "seed": (True, None, None), "temperature": (False, 0, None), "top_p": (False, 0, 1),
    "presence_penalty": (False, None, None), "repetition_penalty": (False, None, None),
    "penalty_decay": (False, 0, 1), "min_p": (False, 0, 1),
}

LOGIT_BIAS_MAX = 300  # OpenAI's limit of a request's logit_bias entries
LOGIT_BIAS_LIMIT = 100.0  # a bias is in [-LOGIT_BIAS_LIMIT, LOGIT_BIAS_LIMIT]


def _finite(x: numbers.Real) -> bool:
    """A finite number (an int too large for a float is not: math.isfinite raised on it)."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _shown(x) -> str:
    """``repr(x)`` cut to 40 characters (an int of thousands of digits has none: Python
    refuses to write one)."""
    try:
        r = repr(x)
    except ValueError:
        return "<an integer of thousands of digits>"
    return r if len(r) <= 40 else r[:37] + "..."


def check_logit_bias(bias, vocab_size: int | None = None) -> str | None:
    """Why ``bias`` is no usable ``logit_bias`` (None: it is, or it is None): a dict of at most
    ``LOGIT_BIAS_MAX`` token ids (ints, below ``vocab_size`` when given) to finite numbers in
    [-LOGIT_BIAS_LIMIT, LOGIT_BIAS_LIMIT]."""
    if bias is None:
        return None
    if not isinstance(bias, dict):
        return f"logit_bias must map token ids to numbers, not {type(bias).__name__}"
    if len(bias) > LOGIT_BIAS_MAX:
        return f"logit_bias has {len(bias)} entries; at most {LOGIT_BIAS_MAX}"
    for token, value in bias.items():
        if not isinstance(token, numbers.Integral) or isinstance(token, bool) or token < 0:
            return (f"Invalid key in 'logit_bias': {_shown(token)}. Keys are token ids "
                    "(integers >= 0)")
        if vocab_size is not None and token >= vocab_size:
            return (f"Invalid key in 'logit_bias': {_shown(token)}. Maximum value is "
                    f"{vocab_size - 1} (the model's vocabulary)")
        if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not _finite(value) or abs(value) > LOGIT_BIAS_LIMIT:
            return (f"Invalid value in 'logit_bias' for token {token}: {_shown(value)}. Values are "
                    f"numbers from -{LOGIT_BIAS_LIMIT:g} to {LOGIT_BIAS_LIMIT:g}")
    return None


def _is_int(v) -> bool:
    """An integer, and not a bool (``True`` is an ``int`` to Python, not to a user)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


class Status(IntEnum):
    PREFILL = 0
    READY = 1
    RUNNING = 2
    FINISHED = 3


@functools.lru_cache(maxsize=1)
def default_tokenizer():
    """The tokenizer of ``RWKV_VOCAB_PATH`` (by default the repository's vocabulary, as a
    loader's without ``vocab_path``), for tasks given none."""
    from server.config import settings
    from server.model.tokenizer import Tokenizer

    return Tokenizer(settings.vocab_path)


def call_all(calls) -> None:
    """Run each of ``calls`` (callables without arguments), every one also after one raised (a
    Ctrl-C on the main thread: ``Task._call`` lets KeyboardInterrupt through there), and raise
    the first such exception again after the last: a task's listeners, the tasks a scheduler
    finishes together (left unfinished, they were held by no scheduler for ever)."""
    first = None
    for call in calls:
        try:
            call()
        except BaseException as e:
            first = first or e
    if first is not None:
        raise first


def new_task_id(prefix: str = "TASK") -> str:
    """``TASK_<32 hex>`` / ``TMP_<32 hex>``: 128 random bits, unguessable."""
    return f"{prefix}_{secrets.token_hex(16)}"


def _check_names(params: dict) -> None:
    """``TypeError`` naming the first key that is no task parameter."""
    for key in params:
        if key not in SAMPLING_FIELDS and key not in ("collect_callback", "finish_callback"):
            raise TypeError(f"unknown task parameter {key!r}")


class Task:
    def __init__(
        self,
        prompt: str | list[int] | None = None,
        *,
        task_id: str = "TMP",
        max_tokens: int = 50,
        temperature: float = 0.3,
        top_p: float = 0.1,
        top_k: int = 20,
        presence_penalty: float = 0.0,
        repetition_penalty: float = 0.0,
        penalty_decay: float = 0.0,
        seed: int | None = 42,
        min_p: float = 0.0,
        collect_callback: Callable[[list[int]], None] | None = None,
        finish_callback: Callable[[list[int]], None] | None = None,
        tokenizer=None,
    ):
        self.task_id = task_id
        self.status = Status.PREFILL
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.presence_penalty = presence_penalty
        self.repetition_penalty = repetition_penalty
        self.penalty_decay = penalty_decay
        self.min_p = min_p  # 0 = off (sampler.py: before top-k and top-p)
        # an integer as int (numpy's too: the task's metadata is JSON); anything else kept for
        # check_params to name (int() read 1.9 and "1" as seed 1)
        self.seed = secrets.randbits(62) if seed is None else \
            int(seed) if _is_int(seed) else seed
        self.rng_counter = 0  # draws made so far from this task's (seed, counter) stream
        self.collect_callback = collect_callback
        self.finish_callback = finish_callback
        # called once (with the task) when its scheduler has it under way (``_under_way``)
        self.under_way_callback: Callable[[Task], None] | None = None
        self.tokenizer = tokenizer  # anything with encode(str)/decode(ids), e.g. the loader

        self.state = None  # State(batch=1) on CPU, or None for the zero state
        self.penalties = None  # Tensor[V] float32 on CPU, or None for zeros
        # why the state cannot run on the loaded model although its shapes fit (set when it is
        # read from the database: values beyond the range of the server's dtypes), or None
        self.state_unfit: str | None = None
        # the digest of the weights that computed the state (``checkpoint.weights_digest``;
        # set where a state is made: the scheduler's copy home, an import; kept with its
        # record, carried by forks): None for one of unknown origin
        self.state_model: str | None = None
        # generation ends at a new turn of the chat format ("User" right after "\n\n"), as at
        # end-of-text; False for fill-in-the-middle (code: "\n\nUser = get_user_model()")
        self.stop_at_turn = True
        # the round ended there (its "stop": "User" drawn, neither returned nor fed), not at
        # end-of-text: a reply it has ends with the turn's blank line (set by the scheduler)
        self.ended_at_turn = False
        # the prefix cache's name of where this task's state started (``cache_origin.py``):
        # None keeps the task out of the cache; ``cache_finish`` False: its finished state is
        # not cached (prefill.py); ``keep_state`` False: its state is not copied home when it
        # finishes (nothing reads a temporary task's state afterwards)
        self.cache_origin: str | None = None
        self.cache_finish = True
        self.keep_state = True
        # a template's pinned copy of its state (``(state, copy)``) and the state its requests
        # last started from inline (``template_start``; CUDA processes)
        self._pinned: tuple | None = None
        self._started_from = None
        self.current_token: int | None = None
        self.pending: list[int] = []
        self.history: list[int] = []  # every token the state has consumed, in order
        # some of them through decode steps (which round otherwise than a prefill of them), or
        # fed from such a state or from a history cut off the prefix cache's grid: the cache
        # keeps no state of this task until a cache hit replaces it
        self.state_decoded = False
        self.output: list[int] = []  # tokens generated in the current round
        # log probabilities: None (off), or how many alternatives each generated token lists
        # (0-20; the OpenAI routes set it, it is not stored); then ``output_logprobs`` holds
        # an entry per token of ``output`` (server/scheduler/logprobs.py)
        self.logprobs: int | None = None
        self.output_logprobs: list = []
        # OpenAI's logit_bias: None, or token id -> a number in [-100, 100] added to that
        # token's logit before sampling (scheduler/logit_bias.py; the OpenAI routes set it;
        # it is not stored: a task read back from the database has none); a round's, as the
        # grammar below: ``continue_gen`` drops it
        self.logit_bias: dict[int, float] | None = None
        # the grammar this round's reply follows (constraint.py: response_format), or None;
        # set by the API routes, not stored; dropped when the round finishes
        self.constraint = None
        # the last tokens of the sequence before this round's output (``round_lead``)
        self.round_lead: list[int] = []
        self._unpopped = 0  # index into output of the first token pop_tokens() has not returned

        self.finish_reason: str | None = None  # "stop" | "length" | "abort" | "error"
        self.error: str | None = None
        self.stop_requested = False
        self.prefill_time = 0.0
        self.gen_time = 0.0
        # when the round's request arrived (``time.perf_counter``), set by the API where it
        # waited before ``add_task`` (an echoed prompt scored first): time to first token
        # counts from it, not from the queue; ``add_task`` takes it (the next round's own)
        self.arrived: float | None = None
        self.created = time.time()
        self.finished_at: float | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._listeners: list[Callable[[Task], None]] = []
        self._stop_hook: Callable[[Task], None] | None = None  # set by the scheduler owning it
        if prompt:
            self.prefill(prompt)

    # ---- reading results -------------------------------------------------------------
    def pop_tokens(self) -> list[int]:
        """The collected tokens (generated and not yet popped), and clears them (the seed's
        "取出并清空")."""
        with self._lock:
            out = self.output[self._unpopped:]
            self._unpopped = len(self.output)
        return out

    def get_all_tokens(self) -> list[int]:
        """The collected tokens (generated and not yet popped), without clearing them (the
        seed's "不清空"): after ``pop_tokens`` only those generated since. The whole round's
        tokens, popped or not: ``round_tokens``."""
        with self._lock:
            return self.output[self._unpopped:]

    def round_tokens(self) -> list[int]:
        """Every token generated in this round, popped or not (what the API reports)."""
        with self._lock:
            return list(self.output)

    def round_output(self) -> list[int]:
        """A handle on this round, for ``tokens_of_round``: the list its tokens go to
        (``continue_gen`` starts the next round in a new one)."""
        return self.output

    def tokens_of_round(self, round_out: list[int], pos: int = 0) -> tuple[list[int], bool]:
        """``(tokens from pos, over)`` of the round ``round_out`` (``round_output``): over once
        it has finished or a later round has begun. Read before its tokens, so a round seen
        over has all its tokens here: a reader of one round never runs on into the next (it
        did when a continue came between the round's end and the reader's wake-up)."""
        with self._lock:
            over = self.status == Status.FINISHED or self.output is not round_out
            return round_out[pos:], over

    def decode(self, tokens: list[int]) -> str:
        return self._need_tokenizer().decode(tokens)

    def _need_tokenizer(self):
        if self.tokenizer is None:  # e.g. read from the database by a TaskManager with no loader
            self.tokenizer = default_tokenizer()
        return self.tokenizer

    def _tokens(self, prompt: str | list[int]) -> list[int]:
        if isinstance(prompt, str):
            return self._need_tokenizer().encode(prompt)
        if isinstance(prompt, (bytes, bytearray, memoryview)):  # (its items are ints: they
            # were taken as token ids)
            raise TypeError("a prompt is text or token ids, not bytes: decode them first")
        try:  # integers only: int() took 1.5 as token 1
            return [operator.index(t) for t in prompt]
        except TypeError as e:
            raise TypeError(f"token ids must be integers: {e}") from None

    def unfed(self) -> list[int]:
        """The tokens this task holds but has not fed yet: its pending prompt, then the current
        token (a finished round's last, which any continuation feeds first)."""
        return list(self.pending) + ([] if self.current_token is None else [self.current_token])

    @property
    def is_finished(self) -> bool:
        return self.status == Status.FINISHED

    @property
    def is_template(self) -> bool:
        return self.task_id.startswith("_")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the task finishes; True if it did within ``timeout``. ``RuntimeError``
        without a timeout on a scheduler's own thread (in a task's callback) for a task not
        done that no scheduler holds (its own finish under way there, say) or that this
        scheduler holds (only this thread could finish it): that wait could never end, and the
        scheduler froze for good (sessions 28-29's QA). Another scheduler's tasks may be
        waited for."""
        owner = getattr(SCHEDULER_THREAD, "owner", None)
        if timeout is None and owner is not None and not self._done.is_set() \
                and (not self.held or self._stop_hook == owner._on_stop):
            raise RuntimeError(f"task {self.task_id}: wait() in a task's callback (on the "
                               "scheduler's thread) would block the scheduler for ever; use a "
                               "finish_callback, or wait on another thread")
        return self._done.wait(timeout)

    # ---- control -----------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the scheduler to end generation at its next step; tokens so far are kept."""
        self.stop_requested = True
        hook = self._stop_hook
        if hook is not None:
            hook(self)

    def prefill(self, prompt: str | list[int]) -> None:
        """Append a prompt (text or token ids) to the sequence; it is fed when the scheduler
        next runs the task."""
        self._check_free("prefilling")
        tokens = self._tokens(prompt)  # before anything changes (a bad prompt changes nothing)
        if self.status == Status.FINISHED:
            self.continue_gen()
        with self._lock:  # (a write's snapshot takes it: its row is one moment's, not torn)
            self._feed(tokens)

    def settle_finished(self, reason: str | None = None) -> None:
        """FINISHED without a round of its own (a template copied or imported): ``wait()``
        returns at once, as for a task that finished here or was read back finished.
        ``reason``: its ``finish_reason`` (None: as it is)."""
        self.status = Status.FINISHED
        if reason is not None:
            self.finish_reason = reason
        self._done.set()

    def _feed(self, tokens: list[int]) -> None:
        if self.current_token is not None:
            self.pending.append(self.current_token)
            self.current_token = None
        self.pending.extend(tokens)
        self._round_starts()
        self.status = Status.PREFILL
        self._done.clear()

    def _round_starts(self) -> None:
        """Note the end of the sequence the round's output will follow (``round_lead``)."""
        current = [] if self.current_token is None else [self.current_token]
        self.round_lead = (self.history[-LEAD_TOKENS:] + self.pending[-LEAD_TOKENS:]
                           + current)[-LEAD_TOKENS:]

    def continue_gen(self, prompt: str | list[int] | None = None, **params) -> None:
        """Reset a finished task to READY for another round, optionally appending a prompt
        (text or token ids) and changing sampling parameters (``max_tokens=...`` etc.; an
        absent one is kept, the random stream too; a ``seed`` given starts its stream at its
        first draw, as a new task with that seed does, so one request samples the same tokens
        from one state however the state was reached (fork, template, import); ``seed=None``:
        a fresh random stream, as in ``Task()`` and the API's ``"seed": null``)."""
        self._check_free("continuing")
        self.check_params(**params)  # before anything changes (nan was stored, refused later)
        # the prompt's tokens too (a bad prompt raised after the round was reset: the task
        # stayed READY in no scheduler, and wait() blocked for ever; session 34's review)
        tokens = self._tokens(prompt) if prompt else None
        if "seed" in params and params["seed"] is None:  # (it kept the old seed: two forks
            params["seed"] = secrets.randbits(62)       # continued so sampled the same)
        if self.is_template:  # the stored row would stay as it was: forks in this process and
            # after a restart would start from different states
            raise RuntimeError(f"task {self.task_id} is a template (read-only); fork it "
                               "(TaskManager.fork_template) and continue the copy")
        with self._lock:  # one step to the TaskManager's snapshot of the finished round (its
            # ``_on_finished`` on the scheduler's thread): a row mixed the two, FINISHED with
            # its output and finish reason gone (session 54's review)
            self._reset_round(params, tokens)

    def _reset_round(self, params: dict, tokens: list[int] | None) -> None:
        """``continue_gen``'s changes (caller holds ``_lock``)."""
        self.update_params(**params)
        if "seed" in params:  # (it went on at the source's draw count: a fork of a template
            self.rng_counter = 0  # and of its import sampled apart)
        self.status = Status.READY
        self.output = []
        self.output_logprobs = []
        self.constraint = None  # (a grammar's state is its round's: set one for the next)
        # so are the biases (a fork copies none, the database stores none: a continue that
        # kept them drew otherwise than the same task forked or read back)
        self.logit_bias = None
        self._unpopped = 0
        self.finish_reason = None
        self.ended_at_turn = False
        self.error = None
        self.stop_requested = False
        self.finished_at = None
        self.prefill_time = self.gen_time = 0.0  # this round's, like output
        self._done.clear()
        if tokens is not None:  # (a prompt was given)
            self._feed(tokens)
        else:
            self._round_starts()

    def update_params(self, **params) -> None:
        _check_names(params)  # (all of them first: a misspelt one changed the others before)
        for key, value in params.items():
            if value is not None:  # a seed as an int, as ``Task()`` keeps it (numpy's too:
                # the task's metadata is JSON, and its write failed)
                setattr(self, key, int(value) if key == "seed" and _is_int(value) else value)

    def sampling_problem(self, vocab_size: int | None = None) -> str | None:
        """Why (``task <id>: ...``) the sampling parameters set now are unusable (``check_params``,
        ``check_logit_bias``), None if they are usable: ``add_task`` raises on them, and
        admission checks again, as one set on the task after it was queued (the SDK's misuse)
        failed every task of its step (a review, session 49)."""
        try:
            self.check_params()
        except (TypeError, ValueError) as e:
            return str(e)  # ("task <id>: ...")
        why = check_logit_bias(self.logit_bias, vocab_size) or self._hooks_problem()
        return None if why is None else f"task {self.task_id}: {why}"

    def _hooks_problem(self) -> str | None:
        """Why the task's constraint or callbacks are unusable, or None: a constraint that is
        no ``Constraint`` failed every task of its pulse (a dict: "'dict' object has no
        attribute 'words'"), a callback that is not callable logged a traceback each pulse
        (session 66's QA)."""
        if self.constraint is not None:  # (the import only then: this runs at every
            # add_task and admission, on the scheduler's path to a first token)
            from server.task.constraint import Constraint

            if not isinstance(self.constraint, Constraint):
                return (f"constraint must be a server.task.constraint.Constraint (or None), "
                        f"not {type(self.constraint).__name__}")
        for name in ("collect_callback", "finish_callback"):
            fn = getattr(self, name)
            if fn is not None and not callable(fn):
                return f"{name} must be callable (or None), not {type(fn).__name__}"
        return None

    def check_params(self, **changes) -> None:
        """Raise ``TypeError`` naming an unknown parameter, ``ValueError`` naming the first
        sampling parameter out of ``PARAM_RANGES``; ``changes``: the values
        ``continue_gen(**changes)`` would set (None: kept), checked before it changes anything."""
        _check_names(changes)
        for key, (integer, low, high) in PARAM_RANGES.items():
            v = changes.get(key)
            v = getattr(self, key) if v is None else v
            if integer:
                ok = _is_int(v)
                kind = "an integer"
            else:  # (True is no number: the API refuses it too)
                ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
                kind = "a finite number"
            ok = ok and (low is None or v >= low) and (high is None or v <= high)
            if not ok:
                bounds = "" if low is None and high is None else \
                    f" in [{low}, {high}]" if high is not None else f" >= {low}"
                raise ValueError(f"task {self.task_id}: {key}={v!r} is invalid; expected "
                                 f"{kind}{bounds}")

    @property
    def needs_prefill(self) -> bool:
        return bool(self.pending)

    @property
    def can_generate(self) -> bool:
        """True if there is a next input token (after pending tokens are fed)."""
        return self.current_token is not None or bool(self.pending)

    # ---- listeners (any number of readers, e.g. SSE subscribers) ---------------------
    def subscribe(self, fn: Callable[[Task], None]) -> None:
        """Call ``fn(task)`` (on the scheduler thread) after each pulse and when finished."""
        with self._lock:
            self._listeners.append(fn)

    def unsubscribe(self, fn: Callable[[Task], None]) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    # ---- called by the scheduler thread -------------------------------------------------
    def _append_output(self, tokens: list[int], logprobs: list | None = None) -> None:
        with self._lock:
            self.output.extend(tokens)
            if logprobs is not None:
                self.output_logprobs.extend(logprobs)
        if tokens and self.collect_callback is not None:
            self._call(self.collect_callback, tokens)
        self._notify()

    @property
    def held(self) -> bool:
        """A scheduler holds the task: queued, running, or finishing (its state on its way
        home). ``add_task`` sets ``_stop_hook`` and ``_finish`` clears it."""
        return self.status == Status.RUNNING or (
            self.status != Status.FINISHED and self._stop_hook is not None)

    def _check_free(self, doing: str) -> None:
        """Refuse to change a task a scheduler holds: the scheduler thread reads and writes its
        tokens meanwhile."""
        if self.held:
            raise TaskHeld(f"task {self.task_id} is running (or queued, or finishing); stop "
                               f"it or wait() before {doing}")

    def _under_way(self) -> None:
        """Fire ``under_way_callback`` once: the scheduler has queued this task's first model
        pass (on CUDA the device works on it while the host goes on), or the task ended
        first."""
        fn, self.under_way_callback = self.under_way_callback, None
        if fn is not None:
            self._call(fn, self)

    def _finish(self, reason: str, error: str | None = None) -> None:
        self.finish_reason = reason
        self.error = error
        self.constraint = None  # (its round is over: a cached task holds no grammar state)
        self.finished_at = time.time()
        with self._lock:  # one step for add_task, which checks both under this lock: between
            # the two a task finishing was not held and not yet finished, and was queued again
            self.status = Status.FINISHED
            self._stop_hook = None  # it belongs to no scheduler (also when dropped unrun)
        failed = None
        try:
            self._under_way()
            if self.finish_callback is not None:
                failed = self._call(self.finish_callback, self.round_tokens())
        except KeyboardInterrupt as e:  # (Ctrl-C in a callback on the main thread: _call)
            failed = e
            raise
        finally:  # done and its readers told, also when Ctrl-C cut the callbacks short
            if failed is not None:
                self._end_unqueued_round(failed)
            if self.status == Status.FINISHED:  # unless the callback started the next round
                self._done.set()  # (continue_gen + add_task): wait() then waits for that one
            self._notify()

    def _end_unqueued_round(self, failed: BaseException) -> None:
        """A finish_callback that continued its task and failed before ``add_task`` queued it
        left it READY in no scheduler: ``wait()`` blocked for ever. The round it began ends
        unrun, an error naming the callback's (logged by ``_call``)."""
        with self._lock:  # (add_task checks and queues under it)
            if self.status == Status.FINISHED or self._stop_hook is not None:
                return  # not continued, or queued: that round runs
            self.status = Status.FINISHED
        self.finish_reason = "error"
        self.error = (f"finish_callback failed after continuing the task, before add_task: "
                      f"{type(failed).__name__}: {failed}")
        self.finished_at = time.time()

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        call_all(functools.partial(self._call, fn, self) for fn in listeners)

    def _call(self, fn, arg) -> BaseException | None:
        """Run a user callback or listener: its error is logged and returned, never raised
        into the scheduler (where it would fail every task of the pulse). A KeyboardInterrupt
        is raised again on the main thread only (Ctrl-C stops a ``run()`` there); raised by a
        callback on another thread (the serving scheduler's, the copy-back's) it is contained
        too: it ended that thread for good, and later tasks hung (session 34's review)."""
        try:
            fn(arg)
        except BaseException as e:  # SystemExit, asyncio.CancelledError (a callback bridging
            # into asyncio), GeneratorExit ... ended the scheduler's thread for good
            if isinstance(e, KeyboardInterrupt) and \
                    threading.current_thread() is threading.main_thread():
                raise
            logger.bind(name="task").exception(f"callback {fn!r} of task {self.task_id} failed")
            return e
        return None

    # ---- copying ----------------------------------------------------------------------
    def fork(self, task_id: str) -> Task:
        """A new READY task starting from a copy of this task's state and parameters.
        ``RuntimeError`` while a scheduler holds this one (its state lags its tokens: the copy
        claimed the tokens with another state, silently)."""
        self._check_free("forking")
        t = Task(task_id=task_id, tokenizer=self.tokenizer,
                 **{k: getattr(self, k) for k in SAMPLING_FIELDS})
        t.state = None if self.state is None else self.state.clone()
        t.penalties = None if self.penalties is None else self.penalties.clone()
        t.state_unfit, t.state_model = self.state_unfit, self.state_model
        t.stop_at_turn = self.stop_at_turn
        t.current_token = self.current_token
        t.pending = list(self.pending)
        t.history = list(self.history)
        t.state_decoded = self.state_decoded
        t.rng_counter = self.rng_counter
        t._round_starts()
        t.status = Status.READY
        return t

    def __repr__(self) -> str:
        return (f"Task({self.task_id}, {self.status.name}, hist={len(self.history)}, "
                f"out={len(self.output)}, pending={len(self.pending)})")
