"""Log probabilities in OpenAI's two shapes, from ``Choice.take_logprobs`` pairs.

A pair is ``(token, (logprob, ((alternative, logprob), ...)))`` (server/scheduler/logprobs.py:
the model's own distribution, before penalties and temperature). A token's text is its bytes
decoded on their own: a token holding part of a character shows U+FFFD there, and the chat
shape's ``bytes`` give the exact bytes (join a character's tokens' bytes to decode it).

- chat (``logprobs: true``, ``top_logprobs`` 0-20): ``{"content": [{"token", "logprob",
  "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, ...]}, ...], "refusal": null}``;
- completions (``logprobs`` 0-5): ``{"tokens", "token_logprobs", "top_logprobs": [{text:
  logprob}, ...], "text_offset"}``, ``text_offset`` counting characters of the choice's text
  (an echoed prompt included) where each token's text starts.
"""

from __future__ import annotations

from server.model.tokenizer import IncrementalDecoder


def _text(tokenizer, token: int) -> tuple[str, bytes]:
    data = tokenizer.decode_bytes([token])
    return data.decode("utf-8", errors="replace"), data


def _chat_token(tokenizer, token: int, logprob: float) -> dict:
    text, data = _text(tokenizer, token)
    return {"token": text, "logprob": logprob, "bytes": list(data)}


def chat_logprobs(tokenizer, pairs: list) -> dict:
    """The chat shape of ``pairs`` (a choice's, or a chunk's)."""
    return {"content": [{**_chat_token(tokenizer, tok, lp),
                         "top_logprobs": [_chat_token(tokenizer, t, v) for t, v in alts]}
                        for tok, (lp, alts) in pairs], "refusal": None}


class CompletionLogprobs:
    """The completions shape for one choice, chunk after chunk: ``text_offset`` goes on from
    the previous chunk's text (``start``: the echoed prompt's length; ``lead``: the bytes of a
    character the prompt ended inside, which the reply completes, as the reply's text is
    decoded)."""

    def __init__(self, tokenizer, start: int = 0, lead: bytes = b""):
        self.tokenizer = tokenizer
        self.offset = start
        self.decoder = IncrementalDecoder(tokenizer, lead)

    def shape(self, pairs: list) -> dict:
        out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for tok, (lp, alts) in pairs:
            out["tokens"].append(_text(self.tokenizer, tok)[0])
            out["token_logprobs"].append(lp)
            out["top_logprobs"].append({_text(self.tokenizer, t)[0]: v for t, v in alts})
            out["text_offset"].append(self.offset)
            self.offset += len(self.decoder.feed([tok]))
        return out
