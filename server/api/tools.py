"""Tool (function) calling for a model without native tool tokens: a prompt convention.

When a request has ``tools``, the prompt's System message lists them (one JSON object per line) and
asks the model to call one by writing, on its own line::

    <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>

The answer is scanned for such blocks (``splitter.py``); each one becomes an OpenAI ``tool_calls``
entry whose ``arguments`` is the JSON text of the object. Parsing is lenient: code fences, a
JSON-string ``arguments``, ``parameters`` instead of ``arguments``, the OpenAI nested
``{"function": {...}}`` form and a missing closing tag at the end of the output are all accepted.
Assistant history with ``tool_calls`` is written back in the same form, so the model sees its own
calls, followed by the ``Tool:`` results.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field

from server.api.safe_json import utf8_safe

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


@dataclass
class ToolSpec:
    name: str
    description: str = ""
    parameters: dict = field(default_factory=dict)
    strict: bool = False  # OpenAI's ``strict: true``: its objects closed in a forced call


def _error(message: str, param: str):
    from server.api.chat import ChatError  # chat imports this module

    return ChatError(message, param)


MAX_TOOLS = 128  # OpenAI's limit: each is written into the prompt (and a forced call's grammar)


def parse_tools(tools) -> list[ToolSpec]:
    """Validate a request's ``tools`` list (OpenAI ``{"type": "function", "function": {...}}``)."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _error("tools must be a list", "tools")
    if len(tools) > MAX_TOOLS:
        raise _error(f"tools has {len(tools)} functions; at most {MAX_TOOLS} are supported",
                     "tools")
    specs = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or tool.get("type", "function") != "function":
            raise _error("each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                         f"tools.{i}")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise _error("a tool's function needs a non-empty string 'name'", f"tools.{i}.function.name")
        params = fn.get("parameters") or {}
        if not isinstance(params, dict):
            raise _error("a tool's 'parameters' must be a JSON schema object",
                         f"tools.{i}.function.parameters")
        specs.append(ToolSpec(name, str(fn.get("description") or ""), params,
                              fn.get("strict") is True))
    return specs


_CHOICE_FORMS = ("tool_choice must be \"none\", \"auto\", \"required\" or "
                 "{\"type\": \"function\", \"function\": {\"name\": ...}}")


def choice_name(tool_choice) -> str | None:
    """The function name a ``tool_choice`` names (None for null and the three strings);
    anything else is refused, with tools or without (a string outside OpenAI's three was read
    as "auto", a number or a list was ignored)."""
    if tool_choice is None:
        return None
    if isinstance(tool_choice, str):
        if tool_choice not in ("none", "auto", "required"):
            raise _error(f"tool_choice {tool_choice[:40]!r} is not one of its forms: "
                         + _CHOICE_FORMS, "tool_choice")
        return None
    if not isinstance(tool_choice, dict):
        raise _error(f"{_CHOICE_FORMS} (got {type(tool_choice).__name__})", "tool_choice")
    fn = tool_choice.get("function") or {}
    name = (fn.get("name") if isinstance(fn, dict) else None) or tool_choice.get("name")
    if not isinstance(name, str):
        raise _error(_CHOICE_FORMS, "tool_choice")
    return name


def forced_tool(tool_choice, tools: list[ToolSpec]) -> str | None:
    """The tool name a ``tool_choice`` object forces, validated against ``tools``."""
    name = choice_name(tool_choice)
    if name is not None and name not in {t.name for t in tools}:
        raise _error(f"tool_choice names a function that is not in tools: {name!r}", "tool_choice")
    return name


def tools_active(tools: list[ToolSpec], tool_choice) -> bool:
    """Whether tools are offered to the model (``tool_choice: "none"`` hides them)."""
    return bool(tools) and tool_choice != "none"


def forces_call(tools: list[ToolSpec], tool_choice) -> bool:
    """Whether ``tool_choice`` forces a call of one of the offered ``tools`` (``"required"``,
    or a function named): the reply is then constrained (``forced_call_grammar``)."""
    return tools_active(tools, tool_choice) and (
        tool_choice == "required" or choice_name(tool_choice) is not None)


def tools_instructions(tools: list[ToolSpec], tool_choice=None) -> str:
    """The System text describing ``tools`` and the call format ("" when none are offered)."""
    if not tools_active(tools, tool_choice):
        return ""
    forced = forced_tool(tool_choice, tools)
    lines = ["You can call these tools (functions), each described by one JSON object:"]
    for i, t in enumerate(tools):
        if forced is None or t.name == forced:
            desc = {"name": t.name, "description": t.description, "parameters": t.parameters}
            try:
                lines.append(json.dumps(desc, ensure_ascii=False))
            except RecursionError:  # parsed, but nested too deeply to write back (was a 500)
                raise _error("the tool's parameters are nested too deeply",
                             f"tools.{i}.function.parameters") from None
    lines.append("To call a tool, write one line per call, exactly in this form:")
    lines.append(OPEN_TAG + '{"name": "<tool name>", "arguments": {<arguments as JSON>}}' + CLOSE_TAG)
    lines.append("Each call's result comes back in a Tool: message.")
    if forced:
        lines.append(f"You must call the tool {forced} now.")
    elif tool_choice == "required":
        lines.append("You must call at least one tool now.")
    else:
        lines.append("If no tool is needed, answer directly.")
    return "\n".join(lines)


def forced_call_grammar(tools: list[ToolSpec], tool_choice, lead: str | None = None
                        ) -> str | None:
    """The grammar of the reply a ``tool_choice`` forces (``"required"`` or a named function;
    None otherwise: the model may answer or call): one call, ``<tool_call>`` + the JSON of a
    call of an offered function (the named one) whose ``arguments`` match its ``parameters``
    schema + ``</tool_call>``, after ``lead`` (``constraint.lead_rules``), then end-of-text
    (constrained decoding,
    server/task/constraint.py; without llguidance installed: None, the call asked for in the
    prompt alone, as before). Each function's schema is its own root (its ``$ref``s point
    into it). ``ChatError`` naming the function's ``parameters`` when they are no object
    schema (OpenAI's rule: arguments are an object) or give no usable grammar."""
    try:
        import llguidance  # noqa: F401

        from server.task.constraint import (GrammarError, closed_objects, json_rule,
                                            lark_grammar, lead_rules)
    except ImportError:
        return None
    forced = forced_tool(tool_choice, tools)
    if not forces_call(tools, tool_choice):
        return None
    rules, alternatives = [], []
    for i, t in enumerate(tools):
        if forced is not None and t.name != forced:
            continue
        param = f"tools.{i}.function.parameters"
        # (no parameters: a function that takes none, as OpenAI reads it: arguments {})
        schema = t.parameters or {"type": "object", "properties": {},
                                  "additionalProperties": False}
        if "type" not in schema and "properties" in schema:  # (an object's, type left out)
            schema = {"type": "object", **schema}
        if schema.get("type") != "object":
            raise _error(f"a function's parameters must be a JSON schema of type \"object\" "
                         f"(got type {str(schema.get('type'))[:40]!r})", param)
        if t.strict:
            schema = closed_objects(schema)
        # the name as the tools' description and the history write it: raw UTF-8 (JSON's
        # ASCII escapes cost a non-ASCII name 6 tokens a character), but a lone surrogate,
        # which no UTF-8 text holds, escaped
        head = '{"name":' + json.dumps(t.name, ensure_ascii=utf8_safe(t.name) != t.name) \
            + ',"arguments":'
        try:
            args = json_rule(schema)
            lark_grammar(f"start: {args}\n")  # this function's own errors, named
        except RecursionError:
            raise _error("the function's parameters are nested too deeply", param) from None
        except GrammarError as e:
            raise _error(f"the function's parameters give no usable grammar for a forced "
                         f"call: {e}", param) from None
        rules.append(f"call_{i}: {json.dumps(head)} args_{i} \"}}\"\nargs_{i}: {args}")
        alternatives.append(f"call_{i}")
    lark = (lead_rules(lead, f"{json.dumps(OPEN_TAG)} call {json.dumps(CLOSE_TAG)}")
            + f"call: {' | '.join(alternatives)}\n" + "\n".join(rules) + "\n")
    try:  # (each function's grammar passed alone; together they may not: thousands of them)
        return lark_grammar(lark)
    except GrammarError as e:
        raise _error(f"the tools give no usable grammar for a forced call: {e}", "tools") \
            from None


def render_tool_calls(calls, param: str) -> str:
    """Assistant history ``tool_calls`` written in the format the model is asked to use."""
    if not isinstance(calls, list):
        raise _error("tool_calls must be a list", param)
    lines = []
    for i, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not fn.get("name"):
            raise _error("each tool call needs function.name", f"{param}.{i}")
        args = fn.get("arguments") or "{}"
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to parse
            pass  # keep the text as the model would see it
        try:
            body = json.dumps({"name": fn["name"], "arguments": args}, ensure_ascii=False)
        except RecursionError:  # parsed just short of the limit, one level more to write
            # (a 500 at one depth, ~953, before; a review, session 14): the text as sent
            raw = fn.get("arguments")
            if not isinstance(raw, str):
                raise _error("the tool call's arguments are nested too deeply",
                             f"{param}.{i}.function.arguments") from None
            body = json.dumps({"name": fn["name"], "arguments": raw}, ensure_ascii=False)
        lines.append(OPEN_TAG + body + CLOSE_TAG)
    return "\n".join(lines)


def _loads_object(text: str):
    text = _FENCE.sub("", text.strip())
    for candidate in (text, text[text.find("{"): text.rfind("}") + 1]):
        try:
            obj = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            return obj
    return None


def parse_tool_call(body: str) -> tuple[str, str] | None:
    """``(name, arguments JSON text)`` from the text between the tags, or None if unusable."""
    obj = _loads_object(body)
    if obj is None:
        return None
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    args = next((obj[k] for k in ("arguments", "parameters", "args") if k in obj), {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except (ValueError, RecursionError):  # not JSON ("city=Paris", cut short): no
            return None  # call a client can parse (it was passed on as one: session 71's QA)
    if args is None:
        args = {}
    if not isinstance(args, dict):  # OpenAI's arguments are an object (LangChain's
        return None  # ToolCall.args is a dict): a list or a number is no call to dispatch
    return name.strip(), json.dumps(args, ensure_ascii=False)


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)
