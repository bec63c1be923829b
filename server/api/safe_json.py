"""Replies that are always valid UTF-8 and strict JSON, whatever the request carried.

JSON lets a client send ``"\\ud800"``: a lone UTF-16 surrogate, which Python keeps in the ``str``
but cannot encode as UTF-8. Prompts pass such text to the tokenizer as raw bytes; anything that
echoes input back (validation errors, ``echo``, ``model``) must not turn it into a 500.
"""

from __future__ import annotations

import json
import math

from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse


def utf8_safe(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (as the tokenizer's decode would
    show its bytes); valid text is returned unchanged."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _finite(obj):
    """A copy of ``obj`` with non-finite floats written as strings (strict JSON has no NaN)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


SHOWN_DEPTH = 32  # nesting shown of a reply too deep to encode (an echoed input)


def _clipped(obj, depth: int = SHOWN_DEPTH):
    """A copy of ``obj`` with what is nested deeper than ``depth`` replaced by a note."""
    if isinstance(obj, (dict, list, tuple)) and depth <= 0:
        return "(nested too deeply to show)"
    if isinstance(obj, dict):
        return {k: _clipped(v, depth - 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clipped(v, depth - 1) for v in obj]
    return obj


def dumps_safe(content) -> bytes:
    """Compact UTF-8 JSON; falls back to ASCII escapes (``\\ud800``) and string NaNs when the
    content holds lone surrogates or non-finite floats, and clips what is nested too deeply to
    encode: a validation error echoes its input, and a body that the JSON parser just managed
    to read (nested ~950 deep) took more stack to write (RecursionError: a 500; a review,
    session 14)."""
    try:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False,
                              separators=(",", ":")).encode("utf-8")
        except (UnicodeEncodeError, ValueError):
            return json.dumps(_finite(content), ensure_ascii=True, allow_nan=False,
                              separators=(",", ":")).encode("ascii")
    except RecursionError:
        return dumps_safe(_clipped(content))


_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def sse_json(obj, **dumps_kw) -> str:
    """One-line JSON for an SSE ``data:`` field: non-ASCII kept as is, but U+2028, U+2029 and
    U+0085 escaped. JSON allows them raw and SSE does not split on them, yet Python's
    ``str.splitlines`` does (``httpx``'s ``iter_lines``, which hand-written clients and SSE
    helpers read streams with): the event's JSON came in two broken halves (a review, session
    14). Strict JSON: non-finite floats are written as strings, as ``dumps_safe`` writes them
    (a state that made the model's output NaN streamed ``"logprob":NaN``; session 66's QA)."""
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, **dumps_kw)
    except ValueError:
        text = json.dumps(_finite(obj), ensure_ascii=False, allow_nan=False, **dumps_kw)
    return text.translate(_LINE_BREAKS)


class SafeJSONResponse(JSONResponse):
    """``JSONResponse`` rendered with ``dumps_safe``."""

    def render(self, content) -> bytes:
        return dumps_safe(content)


MAX_ERRORS = 20  # validation errors a 422 lists
MAX_ECHO = 2_000  # characters (about) of a refused value a 422 echoes


def _echo_fits(obj, budget: int = MAX_ECHO) -> bool:
    """Whether ``obj`` shown in a reply takes at most about ``budget`` characters; walks no more
    of it than that (an object of a million entries is refused at its length)."""
    todo = [obj]
    while todo:
        v = todo.pop()
        if isinstance(v, (str, bytes, dict, list, tuple)):
            budget -= len(v) + 2
            if budget >= 0 and isinstance(v, dict):
                todo += [*v.keys(), *v.values()]
            elif budget >= 0 and not isinstance(v, (str, bytes)):
                todo += v
        elif isinstance(v, int) and not isinstance(v, bool):  # (JSON reads 4,300 digits)
            budget -= _digits(v)
        else:
            budget -= 8
        if budget < 0:
            return False
    return True


def _digits(n: int) -> int:
    """Decimal characters of ``n`` (JSON's integers reach Python's 4,300-digit limit of
    ``str(int)``: writing one is microseconds; past it, its bits' worth)."""
    try:
        return len(str(n))
    except ValueError:  # (past the limit: only an int made here, not a parsed one)
        return n.bit_length() * 30103 // 100000 + 1


def _echo_note(obj) -> str:
    """What a 422 shows instead of a refused value too large to echo."""
    kind = type(obj).__name__
    if isinstance(obj, int):
        return f"({kind} of {_digits(obj):,} digits: too large to echo)"
    size = f"{len(obj):,} {'entries' if isinstance(obj, (dict, list, tuple)) else 'characters'}"
    return f"({kind} of {size}: too large to echo)"


MAX_LOC_KEY = 200  # characters of a key a 422's ``loc`` shows (an unknown field's name)


def _shown_error(e: dict) -> dict:
    """A validation error as a 422 shows it: its input as a note of its size past ~``MAX_ECHO``
    characters, and a name in its ``loc`` (an unknown field's: 1 MB came back whole) cut past
    ``MAX_LOC_KEY``."""
    if "input" in e and not _echo_fits(e["input"]):
        e = {**e, "input": _echo_note(e["input"])}
    loc = e.get("loc")
    if loc and any(isinstance(k, str) and len(k) > MAX_LOC_KEY for k in loc):
        e = {**e, "loc": [f"{k[:40]}... ({len(k):,} characters)"
                          if isinstance(k, str) and len(k) > MAX_LOC_KEY else k for k in loc]}
    return e


def _bytes_text(data: bytes) -> str:
    """Echoed body bytes as text: UTF-8, each undecodable byte shown as U+FFFD."""
    return data.decode("utf-8", "replace")


def _read_as_json(ctype: str) -> bool:
    """Whether FastAPI reads a body of Content-Type ``ctype`` as JSON (``application/json`` or
    ``application/*+json``, parameters and case aside; ``fastapi.routing``'s own test).
    ``"json" in ctype`` took ``text/json`` or ``application/x-json`` for it: their valid JSON
    object came back as "Input should be a valid dictionary", without the Content-Type hint."""
    kind = ctype.split(";", 1)[0].strip().lower()
    main, _, sub = kind.partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


async def validation_error_reply(request, exc) -> SafeJSONResponse:
    """FastAPI's 422 reply (``{"detail": [errors]}``) that survives echoing any input, and shows
    a refused value of more than ~``MAX_ECHO`` characters as a note of its size (a 10 MB
    prompt of the wrong type, a logit_bias of a million entries: sent back whole). A body
    that was not read as JSON because of its Content-Type (``curl -d`` without ``-H``) says so,
    rather than that it "should be a valid dictionary"."""
    found = exc.errors()
    errors = [_shown_error(e) for e in found[:MAX_ERRORS]]
    if len(found) > MAX_ERRORS:  # (a body of 100,000 unknown fields: a 10 MB reply, its
        # encoding held the event loop, every other client, for seconds; session 41's QA)
        more = len(found) - MAX_ERRORS
        errors.append({
            "type": "too_many_errors", "loc": ["body"],
            "msg": f"... and {more} more error{'s' if more > 1 else ''} of this request (the "
                   f"first {MAX_ERRORS} shown)"})
    # a body not read as JSON (no JSON Content-Type) is echoed as its bytes, which FastAPI's
    # encoder decodes as strict UTF-8: any other byte was a UnicodeDecodeError, a 500
    errors = jsonable_encoder(errors, custom_encoder={bytes: _bytes_text})
    ctype = request.headers.get("content-type", "")
    if not _read_as_json(ctype):
        for err in errors:
            if list(err.get("loc", ())) == ["body"] and err.get("type") == "model_attributes_type":
                err["msg"] = ("the body must be a JSON object sent with Content-Type: "
                              f"application/json (this request's: {ctype or 'none'})")
    return SafeJSONResponse({"detail": errors}, status_code=422)


def unreadable_body(content_encoding: str | None, error: BaseException) -> str | None:
    """Why a JSON body could not be read, in words, when it was not for a syntax error: a
    compressed body (this server decodes none), bytes that are no UTF-8, nesting past the
    parser's depth, a number too long to convert. None for a syntax error (``JSONDecodeError``:
    its own message says where) and any other ``error``."""
    coding = (content_encoding or "identity").strip().lower()
    if isinstance(error, UnicodeDecodeError):
        if coding != "identity":
            return (f"the body is sent with Content-Encoding: {coding}, which this server does "
                    "not decode: send it uncompressed")
        if error.encoding.replace("-", "").lower().startswith("utf8"):
            return f"the body is not UTF-8 (byte {error.start}): a JSON body must be UTF-8"
        return (f"the body is no JSON text: its first bytes read as {error.encoding}, which "
                f"does not decode at byte {error.start}")
    if isinstance(error, RecursionError):
        return "the body's JSON nests too deeply to be read"
    if isinstance(error, ValueError) and not isinstance(error, json.JSONDecodeError):
        return f"the body's JSON cannot be read: {error}"
    return None
