"""OpenAI's ``response_format`` as a grammar for constrained decoding (server/task/constraint.py),
and a request's ``logit_bias`` as token ids (``request_logit_bias``): the request fields both
APIs read beside the sampling parameters.

- ``{"type": "text"}`` (or none): no constraint;
- ``{"type": "json_object"}``: the reply is a JSON object;
- ``{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}``: the
  reply is JSON matching ``schema`` (no ``schema``: any JSON object). Every schema is followed
  strictly, whatever ``strict`` says; ``strict: true`` also closes its objects that leave
  ``additionalProperties`` out (``constraint.closed_objects``: OpenAI's strict mode).
Anything else is a ``FieldError`` (the routes name ``response_format``).
"""

from __future__ import annotations

from typing import Any

import anyio

from server.task.constraint import Constraint, GrammarError, closed_objects, json_grammar
from server.task.task import LOGIT_BIAS_MAX, check_logit_bias

TYPES = ("text", "json_object", "json_schema")


class FieldError(ValueError):
    """A ``response_format`` or ``logit_bias`` that cannot be used (the message says why; the
    routes name the field: a 400 on the OpenAI routes, a 422 on the Task API's)."""


def request_logit_bias(raw: dict[str, Any] | None, vocab_size: int) -> dict[int, float] | None:
    """A request's ``logit_bias`` (token id strings, as JSON keys are -> numbers) as token id
    -> bias (None: none); ``FieldError`` naming the entry that is no token id of the
    vocabulary or no number in [-100, 100]."""
    if not raw:
        return None
    if len(raw) > LOGIT_BIAS_MAX:  # before any key is read: an 8 MB object's held the event
        # loop ~0.28 s, to be refused for its count (session 54's note)
        raise FieldError(f"logit_bias has {len(raw)} entries; at most {LOGIT_BIAS_MAX}")
    bias = {}
    for key, value in raw.items():
        if not (key.isascii() and key.isdigit()):
            raise FieldError(f"Invalid key in 'logit_bias': {key[:40]!r}. Keys are "
                                      "token ids (integers >= 0)")
        if len(key) > 18:  # (no id is that long; Python refuses to read 4,300 digits: a 500)
            raise FieldError(f"Invalid key in 'logit_bias': {key[:20]}... "
                                      f"({len(key)} digits). Maximum value is {vocab_size - 1}")
        bias[int(key)] = value
    why = check_logit_bias(bias, vocab_size)
    if why is not None:
        raise FieldError(why)
    return {k: float(v) for k, v in bias.items()}


def response_grammar(fmt: dict[str, Any] | None, lead: str | None = None) -> str | None:
    """The grammar ``fmt`` asks for (None: free text), after ``lead`` (``constraint
    .lead_rules``: a chat reply's)."""
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind not in TYPES:
        raise FieldError(f"response_format type {kind!r} is not supported; use one of "
                                  + ", ".join(TYPES))
    if kind == "text":
        return None
    schema = None
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict):
            raise FieldError("response_format json_schema needs a \"json_schema\" "
                                      "object (with the schema under \"schema\")")
        schema = spec.get("schema")
        if schema is not None and not isinstance(schema, dict):
            raise FieldError("response_format json_schema.schema must be a JSON "
                                      "Schema object")
        if schema is not None and spec.get("strict") is True:
            schema = closed_objects(schema)
    try:
        return json_grammar(schema, lead)
    except ImportError:
        raise FieldError("response_format needs the llguidance package, which this "
                                  "server's environment lacks") from None
    except GrammarError as e:
        raise FieldError(f"response_format: {e}") from None


async def grammar_off_loop(fn, *args):
    """``fn(*args)``, a grammar's compilation (``response_grammar``, ``tools
    .forced_call_grammar``), in a worker thread when the request asks for one (a first
    argument that is not None; the engine releases the GIL while it compiles): a schema of
    thousands of properties compiles for seconds, and inline it held the event loop, every
    stream and ``/health`` waiting, that long (session 47's review: 2.0-2.3 s for 0.5 MB)."""
    if args[0] is None:
        return fn(*args)
    return await anyio.to_thread.run_sync(fn, *args)


async def new_constraints(tokenizer, grammar: str | None, count: int) -> list:
    """``count`` fresh states of ``grammar`` (``Constraint``s, one per task: ``Task.constraint``;
    Nones for no grammar), made off the event loop (the vocabulary's first use by the grammar
    engine takes 0.18 s: docs/experiments/session46/mask_time.log); ``FieldError`` if the
    engine refuses the grammar with this vocabulary (checked without one before) or fails a
    few tokens into a reply (``Constraint.probe``)."""
    if grammar is None:
        return [None] * count

    def make() -> list:
        first = Constraint(grammar, tokenizer)
        problem = first.probe()
        if problem:
            raise FieldError(f"no reply can follow it: {problem}")
        return [first] + [Constraint(grammar, tokenizer) for _ in range(count - 1)]
    try:
        return await anyio.to_thread.run_sync(make)
    except GrammarError as e:
        raise FieldError(f"the grammar cannot be used with this model's vocabulary: {e}") \
            from None
