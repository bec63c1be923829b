"""OpenAI's ``response_format`` as a grammar for constrained decoding (server/task/constraint.py).

- ``{"type": "text"}`` (or none): no constraint;
- ``{"type": "json_object"}``: the reply is a JSON object;
- ``{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}``: the
  reply is JSON matching ``schema`` (no ``schema``: any JSON object). Every schema is followed
  strictly, whatever ``strict`` says.
Anything else is a ``ResponseFormatError`` (the routes' 400 naming ``response_format``).
"""

from __future__ import annotations

from typing import Any

from server.task.constraint import GrammarError, json_grammar

TYPES = ("text", "json_object", "json_schema")


class ResponseFormatError(ValueError):
    pass


def response_grammar(fmt: dict[str, Any] | None) -> str | None:
    """The grammar ``fmt`` asks for (None: free text)."""
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind not in TYPES:
        raise ResponseFormatError(f"response_format type {kind!r} is not supported; use one of "
                                  + ", ".join(TYPES))
    if kind == "text":
        return None
    schema = None
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict):
            raise ResponseFormatError("response_format json_schema needs a \"json_schema\" "
                                      "object (with the schema under \"schema\")")
        schema = spec.get("schema")
        if schema is not None and not isinstance(schema, dict):
            raise ResponseFormatError("response_format json_schema.schema must be a JSON "
                                      "Schema object")
    try:
        return json_grammar(schema)
    except ImportError:
        raise ResponseFormatError("response_format needs the llguidance package, which this "
                                  "server's environment lacks") from None
    except GrammarError as e:
        raise ResponseFormatError(f"response_format: {e}") from None
