"""Turn the model's streamed text into reasoning, answer text and tool calls (pure, no I/O).

Modes (how the prompt ended):

- ``think``: the prompt ended with `` <think``; the model writes ``>reasoning</think>answer``.
- ``direct``: the prompt ended with `` <think>\\n</think``; the model writes ``>answer``.
- ``text``: plain completion; everything is answer text, leading whitespace included (the
  prompt plus the text is the document).

Invariants: no emitted text ever contains (part of) a stop string, the turn boundary
``\\n\\nUser:`` (not in a fill-in-the-middle's text: ``boundary=False``), ``</think>`` or a
tool-call tag. Text that might be the start of one of these is
held back until the next chunk decides; a full match of a stop string or the boundary sets
``stopped`` (the caller stops the task) and everything after it is dropped. Stop strings apply to
the answer from its first non-space character (not to the template's newline before it), not to
the reasoning; the boundary applies to both. A stop string's match inside what may still grow
into a tag or the boundary (``<tool`` with stop ``l``) waits for the next chunk, which decides
as the whole text would: the output never depends on where chunks (pulses) end. In a chat,
trailing newlines held back when the task itself ended (``finish("stop")``: end-of-text or the
engine's new-turn check) are dropped; a completion (``text``) keeps them at end-of-text: they
are the document's, as a code completion's last newline before its suffix. The new-turn check
(``turn``) ends it as the boundary would: its blank line is dropped too.
A tool-call block that is no usable call (bad JSON, no name, a function the request did not offer,
or another than the one its ``tool_choice`` forces, or cut off by ``max_tokens``) is sent as
answer text, tags included: the user sees what the model wrote, and a client never gets a call
it cannot dispatch. With ``one_call`` (``parallel_tool_calls: false``) the output ends after
the first call, as OpenAI's does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from server.api.tools import CLOSE_TAG, OPEN_TAG, parse_tool_call

BOUNDARY = "\n\nUser:"
THINK_END = "</think>"


@dataclass
class Piece:
    kind: str  # "reasoning" | "content" | "tool_call"
    text: str = ""  # reasoning/content text, or the raw block of a tool call
    name: str = ""  # tool_call only
    arguments: str = ""  # tool_call only: JSON text
    logprobs: list = field(default_factory=list)  # (the API's: log probabilities that go
    # out with this piece, ``completion._pieces``)


def held_suffix(buf: str, markers: list[str]) -> int:
    """Length of the longest end of ``buf`` that is a proper prefix of some marker."""
    best = 0
    for m in markers:
        for n in range(min(len(m) - 1, len(buf)), best, -1):
            if buf.endswith(m[:n]):
                best = n
                break
    return best


def in_json_string(text: str) -> bool:
    """Whether ``text`` (the start of a JSON text) ends inside a string: a closing tag there
    is part of a call's arguments (code that prints ``</tool_call>``), not the call's end."""
    inside = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and inside:
            escaped = True
        elif ch == '"':
            inside = not inside
    return inside


def earliest(buf: str, markers: list[str]) -> tuple[int, str | None]:
    """``(index, marker)`` of the first full marker in ``buf`` (``(-1, None)`` if none)."""
    pos, hit = -1, None
    for m in markers:
        i = buf.find(m)
        if i >= 0 and (pos < 0 or i < pos or (i == pos and len(m) > len(hit))):
            pos, hit = i, m
    return pos, hit


def first_ending(buf: str, stops: list[str]) -> tuple[int, str | None]:
    """``(index, stop)`` of the stop string whose first match in ``buf`` ends first (of
    those ending together, the one starting first); ``(-1, None)`` if none. Generation ends
    at the token that completes it, so the choice never depends on where chunks end: any
    other match ends later (stops ``FULL`` and ``FULL]`` cut the same text, but usage
    counted the token of the ``]`` when both had arrived in one pulse)."""
    best, hit = None, None
    for m in stops:
        i = buf.find(m)
        if i >= 0 and (best is None or (i + len(m), i) < best):
            best, hit = (i + len(m), i), m
    return (-1, None) if hit is None else (best[1], hit)


class OutputSplitter:
    """Feed decoded text in chunks; get back ``Piece``s that are safe to send."""

    def __init__(self, mode: str = "text", stop: list[str] | tuple = (), tools: bool = False,
                 inline_think: bool = False, tool_names=None, one_call: bool = False,
                 boundary: bool = True):
        assert mode in ("think", "direct", "text")
        self.mode = mode
        self.boundary = BOUNDARY if boundary else None  # False: fill-in-the-middle (code)
        self.stop = [s for s in stop if s]
        self.tools = tools
        self.tool_names = None if tool_names is None else frozenset(tool_names)  # None: any
        self.one_call = one_call  # the output ends after the first call
        self.inline_think = inline_think  # reasoning sent as "<think>…</think>" inside content
        self.phase = "gt" if mode != "text" else "content"
        self.buf = ""  # always the end of the text fed so far
        self.fed = 0  # characters fed
        self.stopped = False  # a stop string or the boundary matched: the output is over
        self._cut = False  # (finish: the task ended at max_tokens)
        self.stopped_at: int | None = None  # then: characters fed up to the match's end
        self.tool_calls = 0
        self._started = {"reasoning": False, "content": False}
        self._think_open = False

    # ---- public --------------------------------------------------------------------------
    def feed(self, text: str) -> list[Piece]:
        if self.stopped:
            return []
        self.buf += text
        self.fed += len(text)
        return self._drain(final=False)

    def finish(self, reason: str | None = None, turn: bool = False) -> list[Piece]:
        """Flush what was held back; ``reason`` is the task's finish reason, ``turn`` whether
        the engine's new-turn check ended it (``Task.ended_at_turn``)."""
        if self.stopped:
            return []
        if reason == "stop" and (self.mode != "text" or turn) and not (
                self.phase == "content" and first_ending(self.buf[self._lead():], self.stop)[1]):
            # the newlines before a chat answer's end-of-text / new turn, held as the turn
            # boundary's start (unless a stop string lies in them: it ends the answer, as when
            # the text came in one chunk). Only those: what was held because a stop string
            # might start there is the answer's, as without that stop string (session 42's QA:
            # stop "  Q" turned "Hi  " into "Hi", stop ".\n\n###" kept "Done.\n\n"); a
            # completion's, only at a new turn (session 54's note: "Done.\n\n" kept there)
            n = held_suffix(self.buf, [BOUNDARY])
            if n and not self.buf[len(self.buf) - n:].strip():
                self.buf = self.buf[:len(self.buf) - n]
        self._cut = reason == "length"
        out = self._drain(final=True)
        if self.inline_think and self._think_open:
            out.append(Piece("content", THINK_END))
            self._think_open = False
        return out

    # ---- phases ------------------------------------------------------------------------------
    def _drain(self, final: bool) -> list[Piece]:
        out: list[Piece] = []
        while not self.stopped:
            before = (self.phase, len(self.buf))
            getattr(self, "_" + self.phase)(out, final)
            if (self.phase, len(self.buf)) == before:
                break
        if final and not self.stopped and self.buf:
            self._emit(out, "reasoning" if self.phase == "reasoning" else "content", self.buf)
            self.buf = ""
        return out

    def _gt(self, out: list[Piece], final: bool) -> None:
        if not self.buf:
            return
        if self.buf[0] == ">":  # the model closing the switch tag
            self.buf = self.buf[1:]
        self.phase = "reasoning" if self.mode == "think" else "content"

    def _reasoning(self, out: list[Piece], final: bool) -> None:
        markers = [THINK_END, BOUNDARY]
        pos, hit = earliest(self.buf, markers)
        if hit is None:
            return self._emit_safe(out, "reasoning", markers, final)
        self._emit(out, "reasoning", self.buf[:pos])
        self.buf = self.buf[pos + len(hit):]
        if self.inline_think and self._think_open:  # (also at a new turn: the tags balance)
            out.append(Piece("content", THINK_END))
            self._think_open = False
        if hit == BOUNDARY:
            self._stop()
        else:
            self.phase = "content"

    def _content(self, out: list[Piece], final: bool) -> None:
        tags = ([self.boundary] if self.boundary else []) + ([OPEN_TAG] if self.tools else [])
        markers = self.stop + tags
        pos, hit = earliest(self.buf, tags)
        lead = self._lead()  # stop strings apply to the answer, not to the template's newline
        spos, shit = first_ending(self.buf[lead:], self.stop)  # before it (``</think>\n``)
        if shit is not None and (hit is None or (spos + lead, -len(shit)) <= (pos, -len(hit))):
            pos, hit = spos + lead, shit
            if not final and len(self.buf) - held_suffix(self.buf, tags) <= pos:
                return  # the match lies in what may still become a tag or the boundary
        if hit is None:
            if self.tools:  # whitespace before a call, or after the last, is not content:
                # held with an end that may grow into a tag, and dropped at the end
                keep = 0 if final else held_suffix(self.buf, markers)
                text = self.buf[:len(self.buf) - keep].rstrip()
                self._emit(out, "content", text)
                self.buf = "" if final else self.buf[len(text):]
                return
            return self._emit_safe(out, "content", markers, final)
        if hit != OPEN_TAG:
            self._emit(out, "content", self.buf[:pos])
            self.buf = self.buf[pos + len(hit):]  # (the match's end, for _stop)
            self._stop()
            return
        text = self.buf[:pos].rstrip()  # the whitespace before a call is not content
        ws = self.buf[len(text):pos]  # (unless the call is unusable: then it is all text)
        self._emit(out, "content", text)
        end = self.buf.find(CLOSE_TAG, pos)
        while end >= 0 and in_json_string(self.buf[pos + len(OPEN_TAG):end]):
            end = self.buf.find(CLOSE_TAG, end + len(CLOSE_TAG))  # a closing tag in a string
        # a new turn inside the block ends it and the reply (raw newlines are no JSON): the
        # engine's own check misses "User" after a " \n\n" or "\n\n\n" token
        turn = -1 if not self.boundary else self.buf.find(
            self.boundary, pos + len(OPEN_TAG), len(self.buf) if end < 0 else end)
        if turn >= 0:
            end = -1  # (the model's own end, its closing tag missing)
        elif end < 0 and not final:
            self.buf = ws + self.buf[pos:]  # wait for the closing tag
            return
        block_end = turn if turn >= 0 else len(self.buf) if end < 0 else end + len(CLOSE_TAG)
        raw = self.buf[pos:block_end]
        body = self.buf[pos + len(OPEN_TAG): end if end >= 0 else block_end]
        self.buf = self.buf[block_end + (len(self.boundary) if turn >= 0 else 0):]
        # a block cut by max_tokens (no closing tag) is no call, its arguments whole or not
        # (one ended by the model itself without the tag is taken: the model's own end)
        call = None if end < 0 and self._cut and turn < 0 else parse_tool_call(body)
        usable = call is not None and (self.tool_names is None or call[0] in self.tool_names)
        if not usable:
            self._emit(out, "content", ws + raw)  # not a usable call: it is just text
        else:
            self.tool_calls += 1
            out.append(Piece("tool_call", raw, call[0], call[1]))
        if turn >= 0 or (usable and self.one_call):
            self._stop()

    # ---- helpers ---------------------------------------------------------------------------
    def _lead(self) -> int:
        """Length of the whitespace before a chat answer's first character (0 once it started)."""
        if self.mode == "text" or self._started["content"]:
            return 0
        return len(self.buf) - len(self.buf.lstrip())

    def _emit_safe(self, out: list[Piece], kind: str, markers: list[str], final: bool) -> None:
        """Emit the buffer except an end that could still grow into one of ``markers``."""
        keep = 0 if final else held_suffix(self.buf, markers)
        self._emit(out, kind, self.buf[: len(self.buf) - keep])
        self.buf = self.buf[len(self.buf) - keep:]

    def _emit(self, out: list[Piece], kind: str, text: str) -> None:
        if not self._started[kind] and self.mode != "text":
            text = text.lstrip()  # chat: reasoning/answer start at a word (a completion is as is)
        if not text:
            return
        self._started[kind] = True
        if kind == "reasoning" and self.inline_think:
            if not self._think_open:
                out.append(Piece("content", "<think>"))  # one whole delta, as clients expect
                self._think_open = True
            kind = "content"
        out.append(Piece(kind, text))

    def _stop(self) -> None:
        """The output is over; called with ``buf`` holding what came after the match."""
        self.stopped = True
        self.stopped_at = self.fed - len(self.buf)
        self.buf = ""


def collect(pieces: list[Piece]) -> dict:
    """Join pieces into ``{"reasoning", "content", "calls": [(name, arguments)]}`` (non-stream)."""
    reasoning = "".join(p.text for p in pieces if p.kind == "reasoning")
    content = "".join(p.text for p in pieces if p.kind == "content")
    calls = [(p.name, p.arguments) for p in pieces if p.kind == "tool_call"]
    return {"reasoning": reasoning, "content": content, "calls": calls}
