"""Request models and errors of the OpenAI-compatible routes.

Unknown fields are ignored (clients send many: ``user`` as an object,
``parallel_tool_calls``…). Only fields we act on are declared, with types
lenient enough for what real clients send. Failures become OpenAI-shaped 400s, never FastAPI's
``{"detail": …}``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi.responses import JSONResponse
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, TypeAdapter,
                      ValidationError, field_validator)

from server.api.safe_json import SafeJSONResponse, unreadable_body
from server.api.schemas.tasks import whole_number

# OpenAI takes up to 4 stop strings; every one is searched for in every chunk of every choice
# on the event loop, so tens of thousands of them stalled the whole server
MAX_STOP = 16
# characters of one stop string: the splitter holds back output that may still grow into one
# (as long as the stop, less a character) and rechecks it, end against prefix, at each chunk:
# a 6 MB stop of spaces, with output forced to spaces then broken, froze the loop for seconds
MAX_STOP_CHARS = 256
MAX_CHOICES = 128  # tasks one request may start (n; for /v1/completions prompts × n)
_BOOL = TypeAdapter(bool)


def _first_error(item):
    """A list of ``item`` whose validation stops at its first bad item (one error, not one per
    item: ``[1]`` and a million ``1.5`` made three million, ~20 s of the event loop)."""
    return Annotated[list[item], Field(fail_fast=True)]


TokenIds = _first_error(int)


def _not_bool(value):
    """Lax enough for what clients send, but ``true`` is no number: read as 1, it was
    ``max_tokens`` 1, ``n`` 1 or a seed (session 25's QA)."""
    if isinstance(value, bool):
        raise ValueError("a number is needed here, not a boolean")
    return value


def _whole(value):
    """``_not_bool``, and a float with no fraction as the int it is: pydantic's lax int took
    ``2.0`` but refused ``1e30`` ("unable to parse input string"), though the integer 10**30
    is served as the cap (session 40's QA)."""
    return whole_number(_not_bool(value))


Int = Annotated[int, BeforeValidator(_whole)]
Float = Annotated[float, BeforeValidator(_not_bool)]


class OpenAIError(Exception):
    """An error answered as ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.param, self.code, self.headers = param, code, headers

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type,
                          "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return SafeJSONResponse(self.body(), status_code=self.status, headers=self.headers)


class _Request(BaseModel):
    # NaN and infinities (Python's json reads them) are refused as such: NaN failed the
    # bounds instead ("greater than or equal to -2" for a NaN penalty; session 40's QA)
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    model: str | None = None
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    n: Int | None = Field(1, ge=1, le=MAX_CHOICES)
    stop: str | list[str] | None = None
    seed: Int | None = None
    max_tokens: Int | None = Field(None, ge=0)
    max_completion_tokens: Int | None = Field(None, ge=0)  # preferred over max_tokens
    temperature: Float | None = Field(None, ge=0, le=2)
    top_p: Float | None = Field(None, ge=0, le=1)
    min_p: Float | None = Field(None, ge=0, le=1)  # (vLLM's, llama.cpp's); 0 = off
    top_k: Int | None = Field(None, ge=-1, le=2**31 - 1)  # RWKV extension; -1 or 0 = off
    presence_penalty: Float | None = Field(None, ge=-2, le=10)
    frequency_penalty: Float | None = Field(None, ge=-2, le=10)
    penalty_decay: Float | None = Field(None, ge=0, le=1)  # RWKV extension
    # token id (a string: JSON's keys) -> bias; read by the route (``_logit_bias``), which
    # knows the vocabulary
    logit_bias: dict[str, Any] | None = None
    # {"type": "text" | "json_object" | "json_schema", ...}: read by response_format.py
    response_format: dict[str, Any] | None = None

    @field_validator("stop")
    @classmethod
    def _few_stops(cls, v):
        if isinstance(v, list) and len(v) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop strings")
        if any(len(s) > MAX_STOP_CHARS for s in ([v] if isinstance(v, str) else v or [])):
            raise ValueError(f"a stop string has at most {MAX_STOP_CHARS} characters")
        return v

    @field_validator("stream_options")
    @classmethod
    def _usage_is_a_boolean(cls, v):
        """``include_usage`` read as a boolean (JSON's true/false; lax forms such as "false" or
        0 as such; anything else refused): read for truthiness, "no" meant yes (a review,
        session 15). Other keys (vLLM's, ...) are ignored. (A model for ``stream_options``
        instead made the schema fuzzer's invalid-input generation unsatisfiable.)"""
        if v and v.get("include_usage") is not None:
            try:
                v = {**v, "include_usage": _BOOL.validate_python(v["include_usage"])}
            except ValidationError:
                raise ValueError("stream_options.include_usage must be a boolean") from None
        return v

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))

    @property
    def stop_list(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return [s for s in stops if s]


class ChatRequest(_Request):
    messages: list[Any]  # checked message by message in server.api.chat
    # a reply of at least one token, as OpenAI's (0 was a 200 without text); a completion
    # may take 0 (with ``echo``: the prompt alone)
    max_tokens: Int | None = Field(None, ge=1)
    max_completion_tokens: Int | None = Field(None, ge=1)
    reasoning_effort: str | None = None
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None  # false: at most one call (the reply ends there)
    logprobs: bool | None = None
    top_logprobs: Int | None = Field(None, ge=0, le=20)  # (logprobs.TOP_MAX)


class CompletionRequest(_Request):
    # token ids before strings: tried first, a million ids validate in 0.02 s, not 0.2 s (a
    # list[str] failed on each of them first); the route checks the length before the ids
    prompt: str | TokenIds | _first_error(str) | _first_error(TokenIds)
    echo: bool | None = False
    suffix: str | None = None  # text after the completion: the prompt is filled in between
    best_of: Int | None = Field(None, ge=1)
    logprobs: Int | StrictBool | None = None  # (false passes, as documented: Int refuses
    # booleans as numbers, a JSON boolean is StrictBool's; a lax bool read "0" and "false"
    # as false and "1" as true, while "2" was 2: a string is Int's, as other counts')

    @field_validator("prompt", mode="before")
    @classmethod
    def _few_prompts(cls, v):
        """Refused before pydantic checks every item: a million ``[[1], [1], …]`` prompts took
        seconds of the event loop to validate."""
        if isinstance(v, list) and len(v) > MAX_CHOICES and not isinstance(v[0], int):
            raise ValueError(f"at most {MAX_CHOICES} prompts per request")
        if isinstance(v, list) and v:
            # the id lists: the prompt itself, or the lists among its prompts
            lists = [p for p in v if isinstance(p, list)] if isinstance(v[0], (list, str)) else [v]
            if any(bool in set(map(type, p)) for p in lists):  # (C-level: ~20 ms a million ids)
                raise ValueError("token ids are integers, not booleans")
        return v


_TYPE_NAMES = {"str", "int", "float", "bool", "dict", "list", "none"}


def _param(loc: tuple) -> str:
    """``('stop', 'list[str]', 0)`` → ``stop.0``: drop pydantic's union-member names."""
    parts = [str(x) for x in loc
             if isinstance(x, int) or (x.isidentifier() and x not in _TYPE_NAMES)]
    return ".".join(parts) or "body"


# a body past this is parsed (and a chat's prompt built) in a worker thread: the loop gets the
# GIL back every switch interval (5 ms) instead of after the whole job (a 7.8 MB chat body of
# 230,000 messages held it ~1.4 s, every stream waiting; session 25's QA)
OFF_LOOP_BYTES = 256 * 1024


async def off_loop_if_big(request, fn, *args):
    """``fn(*args)`` inline for a small request body, in a worker thread for a big one."""
    if len(await request.body()) <= OFF_LOOP_BYTES:  # (the body is read once and kept)
        return fn(*args)
    return await asyncio.to_thread(fn, *args)


async def parse_request(request, model: type[_Request]) -> _Request:
    """Read and validate the JSON body, raising ``OpenAIError(400)`` with a readable message."""
    return await off_loop_if_big(request, _parse, await request.body(), model,
                                 request.headers.get("content-encoding"))


def _parse(raw: bytes, model: type[_Request], encoding: str | None = None) -> _Request:
    try:
        data = json.loads(raw or b"null")
    except (ValueError, RecursionError) as e:  # (nesting: bad input, not a server error)
        why = unreadable_body(encoding, e) or f"{e}. The body must be a JSON object"
        raise OpenAIError(400, f"We could not parse the JSON body of your request: {why}.") \
            from None
    if not isinstance(data, dict):
        raise OpenAIError(400, "The request body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        param = _param(err["loc"][:1]) if err["type"] == "missing" else _param(err["loc"])
        if err["type"] == "missing":
            raise OpenAIError(400, f"Missing required parameter: '{param}'.", param=param,
                              code="missing_required_parameter") from None
        raise OpenAIError(400, f"Invalid value for '{param}': {err['msg']}.", param=param,
                          code="invalid_value") from None
