"""The greedy tokenizer in native code: ``pyrwkv-tokenizer`` (Rust), used by ``Tokenizer`` when it
holds the very vocabulary this package ships (the world vocabulary of 2023-04-24).

Why a library: encoding walks a byte trie of Python dicts, ~0.15 us a byte with warm caches and
several times that cold (a served request's turn comes after a model pass); a chat turn's new
text took 0.3-0.8 ms on the H200 machine's host before its pass could start (the app's
largest piece on a cached turn's way: docs/performance.md, session 39), a long document tens of
milliseconds of the event loop. The Rust tokenizer gave the same ids on 3,002 texts (CJK,
emoji, code, this README) in 1/6 of the time (2-core CPU machine, session 39).

Used only for the same vocabulary: this package's file, less its first line (id 0, end of text,
which ``Tokenizer`` never produces), must be the library's file line for line; else (another
vocabulary, the library missing) ``Tokenizer`` encodes in Python, as it always did. The library
takes text: bytes that are not valid UTF-8 (a lone surrogate passed through, a start inside a
character) are encoded in Python too."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from server.logger import get_logger

log = get_logger(__name__)
LIBRARY_VOCAB = "rwkv_vocab_v20230424.txt"  # the file the library ships and loads by default


@functools.lru_cache(maxsize=4)
def native_encoder(vocab_path: str) -> Callable[[str], list[int]] | None:
    """``encode(text) -> ids`` of the native tokenizer if it holds ``vocab_path``'s vocabulary
    (its end-of-text line aside), else None. Made once per path (~0.25 s)."""
    try:
        import pyrwkv_tokenizer
    except ImportError:
        return None
    theirs = Path(pyrwkv_tokenizer.__file__).parent / LIBRARY_VOCAB
    try:
        ours = Path(vocab_path).read_text(encoding="utf-8").splitlines()
        same = ours[1:] == theirs.read_text(encoding="utf-8").splitlines() \
            and ours[:1] == ["0 '<|endoftext|>' 13"]
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        log.info(f"native tokenizer not used: {vocab_path} is not the vocabulary of "
                 f"pyrwkv-tokenizer {getattr(pyrwkv_tokenizer, '__version__', '')}".rstrip())
        return None
    return pyrwkv_tokenizer.RWKVTokenizer(vocab_filepath=str(theirs)).encode
