"""RWKV "world" tokenizer: greedy longest-byte-match over `eof_v20230424.txt` (MODEL.md).

The vocabulary file is built by `python -m server.model.build_vocab` (the `rwkv` package's
`rwkv_vocab_v20230424.txt` plus the first line `0 '<|endoftext|>' 13`). Each line is
`id repr(token) byte_length`, the token a `str` (UTF-8 encoded) or `bytes` literal.

Encoding walks a byte trie (one dict per node) from each position and keeps the longest
vocabulary entry that matches; it agrees exactly with `rwkv.rwkv_tokenizer.TRIE_TOKENIZER`.
Id 0 (end of text) is never produced by `encode` (the literal text `<|endoftext|>` encodes as
ordinary tokens) and decodes to nothing.
"""

from __future__ import annotations

import ast
import codecs
import numbers
import threading
from array import array
from collections import deque
from collections.abc import Iterable
from pathlib import Path

import numpy as np

EOS_ID = 0
VOCAB_SIZE = 65536
# the chat format's tokens: turns are joined by "\n\n" and a new one starts with "User"
TURN_NEWLINE = 261  # "\n\n"
USER_TOKEN = 24281  # "User"
NEWLINE = 11  # "\n"
# "…\n", "。\n", "，\n": the only tokens with a newline after other text. The greedy encoder
# writes "。\n\n" as "。\n" and a lone "\n", never with TURN_NEWLINE: after these, NEWLINE is a
# turn's separator too (a chat in Chinese has no other)
NEWLINE_ENDED = (28324, 28329, 28331)
DEFAULT_VOCAB_PATH = Path(__file__).resolve().parents[2] / "eof_v20230424.txt"
_ID = 256  # key under which a trie node stores the id of the token ending there


def load_vocab(path: str | Path) -> dict[int, bytes]:
    """Parse a vocabulary file into {id: token bytes}; raises ValueError on a bad line."""
    vocab: dict[int, bytes] = {}
    with open(path, encoding="utf-8") as f:
        try:
            lines = f.readlines()
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        for lineno, line in enumerate(lines, 1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            try:
                first, last = line.index(" "), line.rindex(" ")
                tid, n = int(line[:first]), int(line[last + 1 :])
                tok = ast.literal_eval(line[first + 1 : last])
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError) as e:
                raise ValueError(f"{path}:{lineno}: unparsable vocabulary line") from e
            if isinstance(tok, str):
                tok = tok.encode("utf-8")
            if not isinstance(tok, bytes) or len(tok) != n or tid in vocab:
                raise ValueError(f"{path}:{lineno}: bad token, length or duplicate id {tid}")
            vocab[tid] = tok
    return vocab


def vocab_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be the tokenizer's vocabulary (None: it can), in one line."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a directory, not a vocabulary file"
    if not path.is_file():
        return f"{path} not found"
    try:
        Tokenizer(path)
    except (ValueError, OSError) as e:
        return str(e)
    return None


class Tokenizer:
    """Greedy longest-match byte tokenizer over the RWKV world vocabulary."""

    def __init__(self, vocab_path: str | Path | None = None, vocab_size: int = VOCAB_SIZE):
        vocab = load_vocab(vocab_path or DEFAULT_VOCAB_PATH)
        if not vocab:
            raise ValueError(f"{vocab_path or DEFAULT_VOCAB_PATH}: no vocabulary lines")
        if max(vocab) >= vocab_size or min(vocab) < 0:
            raise ValueError(f"vocabulary ids must lie in [0, {vocab_size})")
        self.vocab_size = vocab_size
        self.max_id = max(vocab)  # the largest id the file defines
        # _bytes[i]: token i's bytes; b"" for id 0 and ids absent from the file
        self._bytes = [b""] * vocab_size
        self._root: dict = {}
        for tid, tok in vocab.items():
            if tid == EOS_ID:
                continue
            self._bytes[tid] = tok
            node = self._root
            for b in tok:
                node = node.setdefault(b, {})
            node[_ID] = tid
        self.max_len = max(len(t) for t in self._bytes)  # bytes of the longest token
        missing = [b for b in range(256) if _ID not in self._root.get(b, {})]
        if missing:  # invariant relied on by encode_bytes: every single byte is a token
            raise ValueError(f"vocabulary lacks single-byte tokens {missing[:8]}")

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (UTF-8; lone surrogates pass through as their 3 raw bytes)."""
        return self.encode_bytes(text.encode("utf-8", errors="surrogatepass"))

    def encode_bytes(self, data: bytes, start: int = 0) -> list[int]:
        """Greedy tokenisation of ``data[start:]``: at each position take the longest
        vocabulary entry. A choice at position i reads at most ``data[i:i + max_len + 1]``."""
        root, n, i = self._root, len(data), start
        out: list[int] = []
        append = out.append
        while i < n:
            node = root[data[i]]
            best, end, j = node[_ID], i + 1, i + 1
            while j < n:
                node = node.get(data[j])
                if node is None:
                    break
                j += 1
                tid = node.get(_ID)
                if tid is not None:
                    best, end = tid, j
            append(best)
            i = end
        return out

    def validate(self, ids: Iterable[int]) -> list[int]:
        """`ids` as a list of ints; ValueError naming the first id outside [0, vocab_size)."""
        out = [int(t) for t in ids]
        for t in out:
            if not 0 <= t < self.vocab_size:
                raise ValueError(f"token id {t} is outside the vocabulary [0, {self.vocab_size})")
        return out

    def token_bytes(self, tid: int) -> bytes:
        """Bytes of one token; b"" for id 0 and for any id without a vocabulary entry."""
        return self._bytes[tid] if 0 <= tid < self.vocab_size else b""

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenated token bytes (may end inside a UTF-8 character); never raises."""
        table, size = self._bytes, self.vocab_size
        return b"".join([table[t] if 0 <= t < size else b"" for t in ids])

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; invalid or incomplete UTF-8 becomes U+FFFD; never raises."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


SLICED = 2048  # common_prefix_length: the largest block compared as slices


def common_prefix_length(a, b) -> int:
    """Length of the common prefix of two sequences of one item type (bytes, or arrays of token
    ids), compared in blocks growing 8x from 32 items: C-level comparisons of slices up to
    ``SLICED`` items (then a binary search inside the first block that differs), numpy beyond
    (slices would copy). On the scheduler's thread this runs against each of the prefix cache's
    recent sequences for every new prompt: two sequences that part early, or chats of a few
    thousand tokens, cost a few small comparisons and no numpy call (~3x the cost each)."""
    n = min(len(a), len(b))
    lo, step = 0, 32
    while lo < n:
        hi = min(n, lo + step)
        if step > SLICED:
            dtype = np.dtype(memoryview(a).format)
            x, y = np.frombuffer(a, dtype, hi - lo, lo * dtype.itemsize), \
                np.frombuffer(b, dtype, hi - lo, lo * dtype.itemsize)
            diff = np.flatnonzero(x != y)
            if diff.size:
                return lo + int(diff[0])
        elif a[lo:hi] != b[lo:hi]:
            while hi - lo > 1:  # a[:lo] == b[:lo]; the first difference is before hi
                mid = (lo + hi) // 2
                if a[lo:mid] == b[lo:mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo, step = hi, step * 8
    return n


class ReusingEncoder:
    """``Tokenizer.encode`` that reuses the tokens of a recent text sharing a prefix (a chat
    resends its whole history each turn: encoding costs ~0.5 us a token in Python, ~1 ms for a
    2,000-token chat, most of it the previous turn's text).

    Exact: greedy matching decides a token at byte i from ``data[i:i + max_len + 1]`` alone,
    so every token of the recent text that starts at least ``max_len + 1`` bytes before the
    end of the shared prefix is also a token of the new text; encoding resumes after the last
    such token. Keeps the last ``entries`` texts (bytes and token ids); thread-safe."""

    def __init__(self, tokenizer: Tokenizer, entries: int = 8):
        self.tokenizer = tokenizer
        self._lengths = np.array([len(t) for t in tokenizer._bytes], dtype=np.int64)
        self._recent: deque[tuple[bytes, array]] = deque(maxlen=entries)
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        data = text.encode("utf-8", errors="surrogatepass")
        with self._lock:
            recent = list(self._recent)
        shared, old = 0, None
        # longest first, and none shares more than its own length: a chat's previous turn
        # with its reply is a prefix of the next prompt (one memcmp), and the shorter texts
        # after it need no comparison (each cost ~20 us: ~0.2 ms for eight, in a server)
        for seen, ids in sorted(recent, key=lambda r: len(r[0]), reverse=True):
            if len(seen) <= shared:
                break
            m = len(seen) if data.startswith(seen) else common_prefix_length(data, seen)
            if m > shared:
                shared, old = m, ids
        keep, start = 0, 0
        if old is not None and shared > self.tokenizer.max_len + 1:
            lengths = self._lengths[np.frombuffer(old, dtype=np.uint32)]
            ends = np.cumsum(lengths)
            # tokens 0..keep-1 start at or before shared - max_len - 1
            keep = int(np.searchsorted(ends - lengths, shared - self.tokenizer.max_len - 1,
                                       side="right"))
            start = int(ends[keep - 1]) if keep else 0
        out = (old[:keep].tolist() if keep else []) + self.tokenizer.encode_bytes(data, start)
        with self._lock:
            self._recent.append((data, array("I", out)))
        return out


def _utf8_length(first: int) -> int:
    """Bytes of the UTF-8 character whose first byte is ``first`` (1 for any other byte)."""
    return 2 if 0xC0 <= first < 0xE0 else 3 if 0xE0 <= first < 0xF0 else \
        4 if 0xF0 <= first < 0xF8 else 1


def first_char(buf: bytes) -> bool | None:
    """Whether ``buf`` (not empty) starts with a whole valid UTF-8 character: True; False if
    its first bytes can never become one; None while they are a valid beginning of one."""
    need = _utf8_length(buf[0])
    head = buf[:need]
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) == need)
    except UnicodeDecodeError:
        return False
    return True if len(head) == need else None


def incomplete_tail(data: bytes) -> bytes:
    """The end of ``data`` that begins a UTF-8 character not yet complete (b"" if none): what a
    text that goes on from ``data`` must decode first (``IncrementalDecoder``'s ``lead``)."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    dec.decode(data[-4:], final=False)
    return dec.getstate()[0]


class IncrementalDecoder:
    """Streams text from token ids without ever emitting half a UTF-8 character.

    Incomplete trailing bytes are held back until later tokens complete them; bytes that can
    never become valid are emitted at once as U+FFFD. `flush()` ends the stream (a held
    incomplete tail becomes U+FFFD) and resets the decoder.
    """

    def __init__(self, tokenizer: Tokenizer, lead: bytes = b"", shown: bool = False):
        """``lead``: the incomplete character the text goes on from (``incomplete_tail`` of
        what came before it), completed by the first tokens fed. ``shown``: that text was
        shown already, its incomplete end as U+FFFD (a Task API round after one that ended
        inside a character): the lead starts this text only if the first bytes fed complete
        its character, and is dropped otherwise (the text shows no second U+FFFD for it)."""
        self.tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._unsure, self._lead = (lead, len(lead)) if shown else (b"", 0)
        if not shown:
            self._utf8.decode(lead, final=False)

    def feed(self, tokens: Iterable[int] | int) -> str:
        """Text completed by `tokens` (one id or several)."""
        if isinstance(tokens, numbers.Integral):
            tokens = (tokens,)
        data = self.tokenizer.decode_bytes(tokens)
        if self._unsure:
            data = self._settle(data)
            if data is None:
                return ""
        text = self._utf8.decode(data, final=False)
        held = self.pending
        # CPython holds ED A0..BF (a UTF-16 surrogate's prefix) for its surrogatepass
        # handler, though it can never become valid: release it as U+FFFD now.
        if len(held) == 2 and held[0] == 0xED and held[1] >= 0xA0:
            text += self._utf8.decode(b"", final=True)
        return text

    def _settle(self, data: bytes) -> bytes | None:
        """The bytes to decode once a shown lead is settled: with it if ``data`` completes its
        character, else without it; None while too few bytes have come to tell."""
        buf = self._unsure + data
        whole = first_char(buf)
        if whole is None:
            self._unsure = buf
            return None
        if not whole:
            buf = buf[self._lead:]  # it never completes: dropped
        self._unsure = b""
        return buf

    def flush(self) -> str:
        """Whatever is still held (as U+FFFD: it was incomplete); the decoder starts afresh."""
        if self._unsure:  # a shown lead never completed: the bytes fed after it
            data, self._unsure = self._unsure[self._lead:], b""
            return self._utf8.decode(data, final=True)
        return self._utf8.decode(b"", final=True)

    @property
    def pending(self) -> bytes:
        """Bytes held back because they may still become a character."""
        return self._utf8.getstate()[0]
