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
