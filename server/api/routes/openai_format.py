"""OpenAI reply shapes: non-stream bodies and SSE chunk sequences (OPENAI_COMPAT.md cases 6-11, 15).

Stream invariants: every chunk carries the same ``id``/``created``/``model``; chat chunks always
have ``choices`` with a ``delta``; each choice's first delta is ``{"role": "assistant",
"content": ""}`` and ``role`` never appears again; each choice ends with ``delta: {}`` and its
``finish_reason``; with ``include_usage`` every chunk has ``"usage": null`` and one extra
``{"choices": [], "usage": {…}}`` chunk precedes ``[DONE]``. A failure after the stream started
is sent as ``{"error": {…}}`` (no ``choices``) and the stream ends without ``[DONE]``; so does a
reply the server's shutdown cut short (code ``server_shutting_down``), once all the text its
choices had is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass

from server.api.completion import Choice, cut_message, run_choices, usage
from server.api.logprob_format import CompletionLogprobs, chat_logprobs
from server.api.safe_json import sse_json
from server.api.splitter import Piece, collect
from server.api.tools import new_call_id

DONE = "[DONE]"


@dataclass
class Reply:
    """What every chunk or body of one request shares."""

    id: str
    created: int
    model: str
    prompt_tokens: int
    include_usage: bool = False

    def head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}


def dump(obj) -> str:
    return sse_json(obj, separators=(",", ":"))


def error_event(message: str, code: str = "generation_error", type: str = "server_error",
                param: str | None = None) -> str:
    return dump({"error": {"message": message, "type": type, "param": param, "code": code}})


# ---- chat ------------------------------------------------------------------------------------
def chat_message(choice: Choice) -> dict:
    parts = collect(choice.pieces)
    msg = {"role": "assistant", "content": parts["content"]}
    if parts["reasoning"]:
        msg["reasoning_content"] = parts["reasoning"]
    if parts["calls"]:
        msg["content"] = parts["content"] or None
        msg["tool_calls"] = [{"id": new_call_id(), "type": "function",
                              "function": {"name": name, "arguments": args}}
                             for name, args in parts["calls"]]
    return msg


def _chat_logprobs(choice: Choice, tokenizer, pairs: list | None = None) -> dict | None:
    """A chat choice's ``logprobs``: of ``pairs`` (a chunk's: None when there are none), or of
    the whole reply (a list even when empty); None when it asked for none."""
    if choice.task.logprobs is None or pairs == []:
        return None
    return chat_logprobs(tokenizer, choice.all_logprobs() if pairs is None else pairs)


def chat_body(reply: Reply, choices: list[Choice], tokenizer) -> dict:
    return {**reply.head("chat.completion"),
            "choices": [{"index": c.index, "message": chat_message(c),
                         "logprobs": _chat_logprobs(c, tokenizer),
                         "finish_reason": c.finish_reason} for c in choices],
            "usage": usage(reply.prompt_tokens, choices)}


def _tool_call_deltas(k: int, piece: Piece) -> list[dict]:
    """A streamed call: ``id``/``type``/``name`` once, then the arguments; ``index`` on both."""
    first = {"index": k, "id": new_call_id(), "type": "function",
             "function": {"name": piece.name, "arguments": ""}}
    return [{"tool_calls": [first]},
            {"tool_calls": [{"index": k, "function": {"arguments": piece.arguments}}]}]


async def _events(reply: Reply, choices: list[Choice], tokenizer, obj: str, chunks_for,
                  drain=None) -> AsyncIterator[str]:
    """Drive the choices; ``chunks_for(choice, piece)`` gives the chunks of one event. A
    choice the shutdown cut short (``drain``) sends no end of its own: once every choice is
    over, the stream ends with an error event saying so (no usage chunk, no ``[DONE]``)."""
    async with aclosing(run_choices(choices, tokenizer, drain)) as events:
        async for choice, piece in events:
            if piece is None and choice.error:
                yield error_event(f"Generation failed: {choice.error}")
                return
            if piece is None and choice.cut_short:
                continue  # the others' text still comes, then the error event
            for chunk in chunks_for(choice, piece):
                yield chunk
    cut = cut_message(choices)
    if cut is not None:
        yield error_event(cut, "server_shutting_down")
        return
    if reply.include_usage:
        yield dump({**reply.head(obj), "choices": [], "usage": usage(reply.prompt_tokens, choices)})
    yield DONE


async def chat_events(reply: Reply, choices: list[Choice], tokenizer,
                      drain=None) -> AsyncIterator[str]:
    obj = "chat.completion.chunk"
    extra = {"usage": None} if reply.include_usage else {}
    calls = {c.index: 0 for c in choices}

    def chunk(index: int, delta: dict, finish: str | None = None, logprobs=None) -> str:
        return dump({**reply.head(obj), "choices": [
            {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
            **extra})

    def chunks_for(choice: Choice, piece: Piece | None) -> list[str]:
        # a chunk's log probabilities: its piece's (the tokens whose text reached the splitter
        # with it; held text's tokens come with the piece that sends it, or the end)
        lp = _chat_logprobs(choice, tokenizer,
                            choice.tail_logprobs if piece is None else piece.logprobs)
        if piece is None:
            return [chunk(choice.index, {}, choice.finish_reason, lp)]
        if piece.kind == "tool_call":
            calls[choice.index] += 1
            deltas = _tool_call_deltas(calls[choice.index] - 1, piece)
            return [chunk(choice.index, d, logprobs=lp if k == 0 else None)
                    for k, d in enumerate(deltas)]
        key = "reasoning_content" if piece.kind == "reasoning" else "content"
        return [chunk(choice.index, {key: piece.text}, logprobs=lp)]

    for c in choices:
        yield chunk(c.index, {"role": "assistant", "content": ""})
    async with aclosing(_events(reply, choices, tokenizer, obj, chunks_for, drain)) as events:
        async for event in events:
            yield event


# ---- completions -------------------------------------------------------------------------------
def _shapers(choices: list[Choice], tokenizer) -> dict[int, CompletionLogprobs]:
    """Each completion choice's ``logprobs`` builder (the choices that asked for them): from
    the echoed prompt's first token when it was scored, else after the echo."""
    return {c.index: CompletionLogprobs(tokenizer) if c.echo_logprobs is not None else
            CompletionLogprobs(tokenizer, len(c.echo), c.lead)
            for c in choices if c.task.logprobs is not None}


def _whole_logprobs(shaper: CompletionLogprobs, choice: Choice) -> dict:
    """A choice's completions ``logprobs``: the echoed prompt's tokens' (if scored), then the
    reply's."""
    head = shaper.shape(choice.echo_logprobs or [])
    tail = shaper.shape(choice.all_logprobs())
    return {key: head[key] + tail[key] for key in head}


def completion_body(reply: Reply, choices: list[Choice], tokenizer) -> dict:
    shapers = _shapers(choices, tokenizer)
    return {**reply.head("text_completion"),
            "choices": [{"index": c.index, "text": c.echo + collect(c.pieces)["content"],
                         "logprobs": _whole_logprobs(shapers[c.index], c)
                         if c.index in shapers else None,
                         "finish_reason": c.finish_reason} for c in choices],
            "usage": usage(reply.prompt_tokens, choices)}


async def completion_events(reply: Reply, choices: list[Choice], tokenizer,
                            drain=None) -> AsyncIterator[str]:
    extra = {"usage": None} if reply.include_usage else {}
    shapers = _shapers(choices, tokenizer)

    def chunk(index: int, text: str, finish: str | None = None, logprobs=None) -> str:
        return dump({**reply.head("text_completion"), "choices": [
            {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}],
            **extra})

    def logprobs(choice: Choice, pairs: list) -> dict | None:
        shaper = shapers.get(choice.index)
        return shaper.shape(pairs) if shaper is not None and pairs else None

    def chunks_for(choice: Choice, piece: Piece | None) -> list[str]:
        if piece is None:
            return [chunk(choice.index, "", choice.finish_reason,
                          logprobs(choice, choice.tail_logprobs))]
        if piece.kind != "content":
            return []
        return [chunk(choice.index, piece.text, logprobs=logprobs(choice, piece.logprobs))]

    for c in choices:
        if c.echo or c.echo_logprobs:
            yield chunk(c.index, c.echo, logprobs=logprobs(c, c.echo_logprobs or []))
    async with aclosing(_events(reply, choices, tokenizer, "text_completion", chunks_for,
                                drain)) as ev:
        async for event in ev:
            yield event
