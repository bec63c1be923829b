"""The RWKV-7 "g1" chat prompt, built from OpenAI-style messages (pure functions, no FastAPI).

Format (API.md §2)::

    System: <system text>

    User: <question>

    Assistant: <answer>

    Tool: <tool result>

    Assistant: <think

Each message becomes ``Role: content``; messages are joined by ``\\n\\n``; inside a message every run
of blank lines is folded to one ``\\n`` and trailing spaces are removed, so ``\\n\\n`` only ever
separates turns. The prompt ends with ``\\n\\nAssistant:`` and the thinking switch: `` <think``
(the model writes ``>reasoning</think>`` then the answer) or `` <think>\\n</think`` (the model
closes the tag with ``>`` and answers directly).
"""

from __future__ import annotations

import re

from server.api.tools import ToolSpec, render_tool_calls, tools_instructions

ROLES = {"system": "System", "developer": "System", "user": "User",
         "assistant": "Assistant", "tool": "Tool", "function": "Tool"}
# what a direct reply starts with: the model closes THINK_OFF's tag (a constrained reply's
# grammar lets it, then the answer: constraint.lead_rules)
ANSWER_LEAD = ">"
THINK_ON = " <think"
THINK_OFF = " <think>\n</think"
_THINK_BLOCK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
_TEXT_PARTS = ("text", "input_text", "output_text", "refusal")


class ChatError(ValueError):
    """A request the prompt builder cannot turn into a prompt; ``param`` names the field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param


def fold(text: str) -> str:
    """Fold blank lines to single newlines and drop trailing spaces (no ``\\n\\n`` survives)."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(line for line in lines if line).strip()


def content_text(content, param: str) -> str:
    """A message's ``content`` (string, list of parts, or null) as plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ChatError("content must be a string, a list of content parts, or null", param)
    texts = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(part, str):
            texts.append(part)
        elif kind in _TEXT_PARTS or (kind is None and isinstance(part, dict) and "text" in part):
            key = "refusal" if kind == "refusal" else "text"
            if not isinstance(part.get(key), str):  # missing or null: OpenAI refuses it too
                raise ChatError(f"a {kind or 'text'} content part needs a string '{key}'",
                                f"{param}.{i}.{key}")
            texts.append(part[key])
        elif kind in ("image_url", "input_image", "image"):
            raise ChatError("Image inputs are not supported: this is a text-only model "
                            f"(found an '{kind}' content part)", f"{param}.{i}")
        else:
            raise ChatError(f"Unsupported content part type {kind!r}: only text parts are "
                            "accepted by this text-only model", f"{param}.{i}")
    return "\n".join(texts)


def strip_think(text: str) -> str:
    """Remove ``<think>…</think>`` blocks (and an unclosed trailing one) from assistant history."""
    return _THINK_BLOCK.sub("", text)


def message_turn(msg, i: int) -> str | None:
    """One message as ``Role: text`` (None for an empty message that adds nothing; an empty
    tool result is ``Tool:``)."""
    if not isinstance(msg, dict):
        raise ChatError("each message must be an object with 'role' and 'content'", f"messages.{i}")
    role = msg.get("role")
    if role is None:
        raise ChatError("each message needs a 'role': one of system, developer, user, "
                        "assistant, tool", f"messages.{i}.role")
    if not isinstance(role, str) or role not in ROLES:  # a list or object is not hashable
        raise ChatError(f"Unsupported role {role!r}: expected one of "
                        "system, developer, user, assistant, tool", f"messages.{i}.role")
    text = content_text(msg.get("content"), f"messages.{i}.content")
    if role == "assistant":
        text = strip_think(text)  # reasoning_content of history is ignored too
        calls = msg.get("tool_calls")
        if calls:
            text = (fold(text) + "\n" + render_tool_calls(calls, f"messages.{i}.tool_calls")).strip()
    text = fold(text)
    if not text:  # a tool's empty result is still its call's answer: results go by order
        return f"{ROLES[role]}:" if ROLES[role] == "Tool" else None
    return f"{ROLES[role]}: {text}"


def chat_turns(messages: list, tools: list[ToolSpec] | None = None,
               tool_choice=None) -> list[str]:
    """The messages as ``Role: text`` turns, the tools' description in the first System turn
    (see ``build_chat_prompt``)."""
    if not isinstance(messages, list) or not messages:
        raise ChatError("messages must be a non-empty list", "messages")
    turns = [t for i, m in enumerate(messages) if (t := message_turn(m, i)) is not None]
    guide = tools_instructions(tools, tool_choice) if tools else ""
    if guide:
        guide = fold(guide)
        if turns and turns[0].startswith("System: "):
            turns[0] = f"{turns[0]}\n{guide}"
        else:
            turns.insert(0, f"System: {guide}")
    return turns


def build_chat_prompt(messages: list, think: bool, tools: list[ToolSpec] | None = None,
                      tool_choice=None) -> str:
    """The whole prompt, ending with ``\\n\\nAssistant:`` plus the thinking switch.

    ``tools`` (already validated) are described in a System message placed first, or appended to
    the conversation's first System message. ``tool_choice`` may be ``"auto"``, ``"required"``,
    ``{"type": "function", "function": {"name": ...}}`` or ``"none"`` (tools not described).
    """
    turns = chat_turns(messages, tools, tool_choice)
    return "\n\n".join(turns + ["Assistant:" + (THINK_ON if think else THINK_OFF)])


def history_text(messages: list, tools: list[ToolSpec] | None = None, tool_choice=None) -> str:
    """The text every later prompt of this conversation starts with: its turns and the
    separator before the next one (``messages`` ending with the reply, as clients re-send it)."""
    return "\n\n".join(chat_turns(messages, tools, tool_choice)) + "\n\n"


def fim_prompt(prefix: str, suffix: str) -> str:
    """The fill-in-the-middle prompt (rwkv_lightning's format): the model writes the text
    between ``prefix`` and ``suffix`` (``/v1/tasks/fim``; ``suffix`` of ``/v1/completions``)."""
    return f"✿prefix✿✿suffix✿{suffix}✿middle✿{prefix}"


def wants_think(reasoning_effort, default: bool) -> bool:
    """The thinking switch: ``reasoning_effort`` ``none`` → direct, any other value → think."""
    if reasoning_effort is None:
        return default
    return str(reasoning_effort).lower() != "none"
