"""Constrained decoding: a task whose reply must follow a grammar (OpenAI's ``response_format``:
JSON, or JSON matching a schema; a forced tool call, server/api/tools.py) carries a
``Constraint`` (``Task.constraint``). Grammars are written in llguidance's Lark dialect, JSON
schemas embedded as ``%json`` rules, after an optional lead (``lead_rules``).

The grammar engine is llguidance (Rust; the structured-output engine of vLLM, SGLang and
llama.cpp): from the model's vocabulary (each token's bytes) it computes, at each step, the
tokens that keep the reply a prefix of a sentence of the grammar: for the 65,536-token
vocabulary on the 2-core CPU machine a mask took 0.015-0.028 ms (median), up to 0.33 ms (p90)
and 0.94 ms (max) along random walks through two JSON grammars, and the vocabulary's first use
0.18 s and ~26 MiB (docs/experiments/session46/mask_time.py, .log). Once the grammar is
complete only end-of-text (token 0) is allowed, so the reply ends there. The scheduler's
engine asks each constrained row for its mask before a step's sampling and tells it the token
it accepted after (``server/scheduler/guide.py``).

llguidance is imported when a constraint is first made: a server that never gets one runs
without it.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
from loguru import logger

_LOCK = threading.Lock()
PROBE_STEPS = 16  # steps ``Constraint.probe`` walks (~2 ms for a JSON schema's grammar)


class GrammarError(ValueError):
    """A response format that gives no usable grammar (the message says why)."""


def json_rule(schema: dict[str, Any] | None) -> str:
    """``schema`` (None: any JSON object) as the body of a Lark rule, ``%json {...}``, with
    fixed whitespace (one form between items and after keys: with any whitespace allowed
    between tokens a reply can run on in blanks until max_tokens, as the tiny random model's
    did at once), unless the schema's own ``x-guidance`` (llguidance's options) asks for a
    ``whitespace_pattern``: the client's choice. Its ``$ref``s point into it.
    ``RecursionError`` for one nested too deeply to write."""
    schema = {"type": "object"} if schema is None else schema
    guidance = schema.get("x-guidance") or {}
    if not isinstance(guidance, dict):
        raise GrammarError(f"the schema's x-guidance must be an object of llguidance's JSON "
                           f"options, not {type(guidance).__name__}")
    guidance = {**guidance, "whitespace_flexible": False}
    return "%json " + json.dumps({**schema, "x-guidance": guidance})


# JSON Schema's keywords whose values are subschemas: one, a list of them, or a map to them
_ONE = ("additionalProperties", "items", "not", "if", "then", "else", "contains",
        "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def closed_objects(schema: Any) -> Any:
    """A copy of ``schema`` in which every object schema that leaves ``additionalProperties``
    out has it false: the keys it names (and its ``patternProperties``') and no others. What
    OpenAI's ``strict: true`` means (OpenAI refuses a strict schema without it; JSON Schema's
    default lets any other key come, and a model wrote on in one until ``max_tokens``)."""
    if isinstance(schema, list):  # (a list form of ``items``)
        return [closed_objects(s) for s in schema]
    if not isinstance(schema, dict):
        return schema  # (true / false)
    out = dict(schema)
    for key in _ONE:
        if key in out:
            out[key] = closed_objects(out[key])
    for key in _LIST:
        if isinstance(out.get(key), list):
            out[key] = [closed_objects(s) for s in out[key]]
    for key in _MAP:
        if isinstance(out.get(key), dict):
            out[key] = {name: closed_objects(s) for name, s in out[key].items()}
    kind = out.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind) or \
        (kind is None and "properties" in out)
    if is_object and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def lead_rules(lead: str | None, body: str) -> str:
    """Lark rules of ``body`` (a rule's right side) after ``lead`` (a chat reply's: its prompt
    leaves the model to close its thinking switch, ``>``, first: server/api/chat.py's
    ``ANSWER_LEAD``) and at most one blank (a space or a newline: what a model writes after
    ``Assistant:`` or a ``>``; JSON readers skip it)."""
    start = f"{json.dumps(lead)} " if lead is not None else ""
    return f"start: {start}blank? {body}\nblank: \" \" | \"\\n\"\n"


def json_grammar(schema: dict[str, Any] | None, lead: str | None = None) -> str:
    """The grammar of JSON text matching ``schema`` (None: any JSON object), after ``lead``
    (``lead_rules``), as llguidance serialises it; ``GrammarError`` for a schema it cannot
    use."""
    try:
        return lark_grammar(lead_rules(lead, "json") + f"json: {json_rule(schema)}\n")
    except RecursionError:
        raise GrammarError("the JSON schema is nested too deeply") from None


def lark_grammar(lark: str) -> str:
    """A grammar in llguidance's Lark dialect (``%json {schema}`` embeds a JSON schema),
    serialised; ``GrammarError`` for one it cannot use."""
    from llguidance import LLMatcher

    grammar = LLMatcher.grammar_from_lark(lark)
    error = LLMatcher.validate_grammar(grammar)
    if error:
        raise GrammarError(f"the grammar cannot be used: {_first_line(error)}")
    return grammar


def _first_line(message: str) -> str:
    """The grammar engine's error message, cut: its other lines quote the grammar (a whole
    schema) or a Rust backtrace."""
    return (message.splitlines() or [""])[0][:300]


def _first_choice(words: np.ndarray) -> list[int] | None:
    """The first token a mask (int32 bit words) allows, end-of-text (0) last: ``[token]``;
    ``[]`` if it allows none; None if it allows end-of-text alone (a whole reply)."""
    allowed = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
    if len(allowed) == 1 and allowed[0] == 0:
        return None
    return [int(allowed[1] if allowed[0] == 0 else allowed[0])] if len(allowed) else []


def _ll_tokenizer(tokenizer):
    """llguidance's view of ``tokenizer`` (a ``server.model.tokenizer.Tokenizer``), made once
    per tokenizer (0.18 s for the world vocabulary: mask_time.log) and kept on it."""
    made = getattr(tokenizer, "_llguidance", None)
    if made is not None:
        return made
    import llguidance

    class _Vocabulary:  # what llguidance.TokenizerWrapper reads
        eos_token_id = 0  # end-of-text
        bos_token_id = None
        tokens = tokenizer._bytes

        def __call__(self, data):
            return tokenizer.encode_bytes(data if isinstance(data, bytes) else data.encode())

    with _LOCK:
        if getattr(tokenizer, "_llguidance", None) is None:
            tokenizer._llguidance = llguidance.LLTokenizer(
                llguidance.TokenizerWrapper(_Vocabulary()),
                slices=llguidance.LLTokenizer.json_slices())
    return tokenizer._llguidance


def _executor():
    """llguidance's thread pool for the masks of several rows at once (made once)."""
    global _EXECUTOR
    with _LOCK:
        if _EXECUTOR is None:
            import llguidance

            _EXECUTOR = llguidance.LLExecutor()
    return _EXECUTOR


_EXECUTOR = None


class Constraint:
    """A grammar's state along one reply: which tokens may come next (``fill_masks``), the
    tokens that came (``accept``)."""

    def __init__(self, grammar: str, tokenizer):
        from llguidance import LLMatcher

        self.grammar = grammar
        vocab = _ll_tokenizer(tokenizer)
        self._matcher = LLMatcher(vocab, grammar, log_level=0)
        self.words = -(-vocab.vocab_size // 32)  # int32 words of its mask
        self.fault: str | None = None  # an exception the grammar engine raised (``failed``)
        self.whole_at_fault = False  # the reply was a whole sentence when it came (``failed``)
        self.armed = False  # ``arm`` found a forced run ahead
        if self._matcher.is_error():
            raise GrammarError(_first_line(self._matcher.get_error()))

    @property
    def error(self) -> str | None:
        """Why the reply cannot go on (None: it can): an exception the engine raised
        (``failed``), or the engine's own error state, taken as the fault (logged once, its
        first line: the rest quotes the parser's state and the grammar)."""
        if self.fault is None and self._matcher.is_error():
            self.fault = f"the grammar engine stopped: {_first_line(self._matcher.get_error())}"
            logger.warning(self.fault)
        return self.fault

    def probe(self, steps: int = PROBE_STEPS) -> str | None:
        """Why no reply can follow the grammar, found along one path of up to ``steps`` tokens
        (each forced run, else the first token it allows, end-of-text last), on a copy of the
        state; None if the path met no fault. The engine accepts some grammars it then fails
        on a few tokens in (a schema that is only a reference to itself, a required property
        nested without end, 2,000 alternatives in one place: a fuzzing helper, session 49):
        checked when a request brings its grammar, they are a 400, not a failed reply. Not a
        proof: a fault on another path still fails its reply (``error``)."""
        m = self._matcher.deep_copy()
        words = np.zeros(self.words, dtype=np.int32)
        for n in range(steps):
            run = []
            try:  # (each call may leave the engine in its error state: checked below)
                m.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
                if not m.is_error():
                    run = list(m.compute_ff_tokens()) or _first_choice(words)
                if run and not m.is_error():
                    m.consume_tokens(run)
            except Exception as e:
                return f"the grammar engine failed {n} steps into a reply: {e!r:.300}"
            if m.is_error():
                return (f"the grammar engine failed {n} steps into a reply: "
                        f"{_first_line(m.get_error())}")
            if run is None:
                return None  # (a whole reply: it ends here)
            if not run:
                return f"the grammar allows no token {n} steps into a reply"
        return None

    def failed(self, exc: BaseException, taking: bool = False) -> None:
        """The grammar engine raised on this reply: from now on it allows nothing (its row
        ends at end-of-text, as one in an error state), the other rows go on. ``taking``: it
        raised taking a token (that token is in the reply, unchecked); else asked what comes
        next, about a reply it had taken whole: ``whole_at_fault`` notes whether that reply
        was then a whole sentence of the grammar (its end at end-of-text is then one the
        grammar allowed: cycle.ending)."""
        self.fault = f"the grammar engine failed: {exc!r:.300}"
        logger.warning(self.fault)
        try:
            self.whole_at_fault = not taking and self.complete
        except Exception:  # (the engine failing again: not known whole)
            self.whole_at_fault = False

    def accept(self, token: int) -> bool:
        """The reply went on with ``token`` (False: the grammar did not allow it, or the engine
        failed: ``error`` says so)."""
        if self.fault is not None:
            return False
        try:
            return bool(self._matcher.consume_token(token))
        except Exception as e:
            self.failed(e, taking=True)
            return False

    def forced(self, vocab: int | None = None) -> list[int]:
        """The tokens the grammar forces next, whatever the model would say (e.g. a forced
        call's ``<tool_call>{"name":"get_weather","arguments":{"`` once its first character
        came: docs/experiments/session47/fast_forward/); none in an error state. ``vocab``:
        the model's token count, the run cut before the first id past it (a model smaller
        than the tokenizer: its masks never allow those, and fed they index past its
        embedding and penalties)."""
        if self.error is not None:
            return []
        try:
            run = list(self._matcher.compute_ff_tokens())
        except Exception as e:
            self.failed(e)
            return []
        # (end-of-text ends a reply: never fed; nor is an id the model does not have)
        cut = [i for i, t in enumerate(run) if t == 0 or (vocab is not None and t >= vocab)]
        return run[:cut[0]] if cut else run

    def arm(self, at_least: int, vocab: int | None = None) -> bool:
        """Whether a fast-forward is due (``server/scheduler/guide.py``, which asks before
        each step's sampling): arms the reply when the grammar forces ``at_least`` tokens
        (below ``vocab``: ``forced``) from here. The step then takes one token (the first
        forced one, or another spelling of it) and ``take_forced`` gives the forced run after
        it. Where a reply arms depends on its tokens alone, never on where a pulse ended."""
        self.armed = self.armed or len(self.forced(vocab)) >= at_least
        return self.armed

    def take_forced(self, vocab: int | None = None) -> list[int]:
        """An armed reply (its step taken since): the forced tokens from here (below
        ``vocab``: ``forced``; not yet accepted: ``accept`` each that is fed), disarmed. Else
        none."""
        if not self.armed:
            return []
        self.armed = False
        return self.forced(vocab)

    @property
    def complete(self) -> bool:
        """The reply so far is a whole sentence of the grammar."""
        return bool(self._matcher.is_accepting())


def fill_masks(rows: list[tuple[Constraint, int]], words: np.ndarray) -> None:
    """For each ``(constraint, i)``: ``words[i]`` (int32, the constraints' ``words`` long) <-
    the tokens it allows next as bits (token t: bit t % 32 of word t // 32); several at once
    on llguidance's threads. A constraint in an error state allows nothing (its row is all
    zeros: the caller lets such a row end); so does one whose mask the engine fails to give
    (``Constraint.failed``: that row alone, the others' masks are computed one by one)."""
    assert words.dtype == np.int32 and words.flags["C_CONTIGUOUS"]
    ok = []
    for c, i in rows:
        assert c.words == words.shape[1], (c.words, words.shape)
        if c.error is not None:
            words[i] = 0
        else:
            ok.append((c, i))
    if len(ok) > 1:
        try:
            _executor().unsafe_compute_mask_ptr([(c._matcher, i) for c, i in ok],
                                                words.ctypes.data, words.shape[1] * 4,
                                                words.shape[0])
            return
        except Exception as e:  # find the row(s) at fault: each alone
            logger.warning(f"the grammar engine failed on {len(ok)} rows' masks ({e!r:.200}): "
                           "computing them one by one")
    for c, i in ok:
        try:
            c._matcher.unsafe_compute_mask_ptr(words[i].ctypes.data, words[i].nbytes)
        except Exception as e:
            c.failed(e)
            words[i] = 0
