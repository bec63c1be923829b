"""Tokenising request text from a handler: on the event loop when it is short, else in a thread.

The tokenizer is pure Python, so a thread encoding does not run beside the event loop: it holds
the GIL, and the loop gets it back only when the encoding ends or after the interpreter's switch
interval (5 ms). An encoding shorter than that blocks the loop as long either way, and the two
thread hops (~0.1 ms each on a slow CPU) come on top, on the request's time to first token.
``INLINE_BYTES`` of text take at most ~3 ms to encode there (about 0.2 us a byte, whatever the
script), so text up to it is encoded inline.
"""

from __future__ import annotations

import asyncio

INLINE_BYTES = 16384


def is_short(text: str, limit: int = INLINE_BYTES) -> bool:
    """Whether ``text`` is at most ``limit`` bytes in UTF-8 (``str.isascii`` is O(1))."""
    if len(text) > limit:
        return False
    return text.isascii() or len(text.encode("utf-8", errors="surrogatepass")) <= limit


async def encode(loader, text: str) -> list[int]:
    """``loader.encode(text)``: inline for short text, in a worker thread otherwise."""
    if is_short(text):
        return loader.encode(text)
    return await asyncio.to_thread(loader.encode, text)


def past_vocab(tokens: list[int], vocab_size: int) -> int | None:
    """The first token id at or past a model's vocabulary (None: all fit). The tokenizer's
    vocabulary (65,536) can be larger than a checkpoint's (``--vocab`` of the random generator):
    such a text was a 500 in the first model pass (a review, session 14)."""
    if not tokens or max(tokens) < vocab_size:
        return None
    return next(t for t in tokens if t >= vocab_size)


def past_vocab_message(bad: int, vocab_size: int) -> str:
    """The message for a text that tokenizes to ``bad``, past the model's vocabulary."""
    return (f"The text tokenizes to id {bad}, outside this model's vocabulary [0, {vocab_size}) "
            "(its checkpoint has fewer tokens than the tokenizer).")
