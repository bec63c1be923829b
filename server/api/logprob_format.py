"""Log probabilities in OpenAI's two shapes, from ``Choice.take_logprobs`` pairs.

A pair is ``(token, (logprob, alternatives, their logprobs))`` (server/scheduler/logprobs.py:
the model's own distribution, before penalties and temperature). A token's text is its bytes
decoded on their own; a token that is no whole UTF-8 text by itself (part of a character) is
written ``bytes:\\xe4\\xb8`` (as OpenAI writes such tokens: distinct tokens stay distinct keys),
and the chat shape's ``bytes`` give the exact bytes (join a character's tokens' bytes to
decode it).

- chat (``logprobs: true``, ``top_logprobs`` 0-20): ``{"content": [{"token", "logprob",
  "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, ...]}, ...], "refusal": null}``;
- completions (``logprobs`` 0-5): ``{"tokens", "token_logprobs", "top_logprobs": [{text:
  logprob}, ...], "text_offset"}``; each ``top_logprobs`` dict holds the sampled token too (up
  to ``logprobs`` + 1 keys, as OpenAI's), and ``text_offset`` counts characters of the
  choice's ``text`` (an echoed prompt included) where each token's text starts; with ``echo``
  the prompt's tokens come first, the first with null (it follows nothing).
"""

from __future__ import annotations

from server.model.tokenizer import IncrementalDecoder, first_char


def token_text(tokenizer, token: int) -> tuple[str, bytes]:
    """``(text, bytes)`` of one token (``bytes:\\x..`` for bytes that are no text alone)."""
    data = tokenizer.decode_bytes([token])
    try:
        return data.decode("utf-8"), data
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in data), data


def _chat_token(tokenizer, token: int, logprob: float) -> dict:
    text, data = token_text(tokenizer, token)
    return {"token": text, "logprob": logprob, "bytes": list(data)}


def chat_logprobs(tokenizer, pairs: list) -> dict:
    """The chat shape of ``pairs`` (a choice's, or a chunk's)."""
    return {"content": [{**_chat_token(tokenizer, tok, lp),
                         "top_logprobs": [_chat_token(tokenizer, t, v)
                                          for t, v in zip(ids, vals)]}
                        for tok, (lp, ids, vals) in pairs], "refusal": None}


class CompletionLogprobs:
    """The completions shape for one choice, chunk after chunk: ``text_offset`` goes on from
    the previous chunk's text (``start``: the echoed prompt's length; ``lead``: the bytes of a
    character the prompt ended inside, which the reply completes, as the reply's text is
    decoded)."""

    def __init__(self, tokenizer, start: int = 0, lead: bytes = b""):
        self.tokenizer = tokenizer
        self.offset = start  # characters of text decoded so far
        self.decoder = IncrementalDecoder(tokenizer, lead)

    def _start(self, data: bytes) -> int:
        """Where a token of bytes ``data`` starts: after the text so far, and after the
        U+FFFD its held bytes become unless ``data`` goes on with their character (then the
        token starts inside that character, which began before it)."""
        held = self.decoder.pending
        if held and first_char(held + data) is False:  # (data does not go on with it)
            return self.offset + len(held.decode("utf-8", errors="replace"))
        return self.offset

    def shape(self, pairs: list) -> dict:
        """The shape of ``pairs``; an entry None (an echoed prompt's first token, which
        follows nothing) gives null for its logprob and its alternatives, as OpenAI's."""
        out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for tok, entry in pairs:
            text, data = token_text(self.tokenizer, tok)
            out["tokens"].append(text)
            top = None
            if entry is not None:
                lp, ids, vals = entry
                top = {token_text(self.tokenizer, t)[0]: v for t, v in zip(ids, vals)}
                top.setdefault(text, lp)  # the token's own, always (OpenAI's "logprobs + 1")
            out["token_logprobs"].append(None if entry is None else entry[0])
            out["top_logprobs"].append(top)
            out["text_offset"].append(self._start(data))
            self.offset += len(self.decoder.feed([tok]))
        return out
