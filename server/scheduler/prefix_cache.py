"""PrefixCache: recurrent states kept under the exact token prefix they consumed.

An entry is the state of a sequence after it consumed ``tokens[:n]`` starting from an *origin*:
``""`` is the zero state (a fresh request); any other origin names one known starting state (an
imported template: ``"state:<digest>:<n>"``). Key: ``(origin, n, h)`` with ``h`` the 62-bit hash
of ``tokens[:n]`` (``prefix_hashes``: two 31-bit polynomial hashes); a lookup verifies the entry's
stored tokens, so a hash collision can only cost a miss, never a wrong state.

An entry of a whole prompt (its last token consumed too, see prefill.py) may also keep that token's
logits, so that the same prompt again needs no model call before its first token (a few hundred
KB, counted in its bytes); they move between the tiers with its state (on the host into its arena
row's logits area, host_arena.py: a move allocates no pinned memory).

Only the WKV and token-shift state is cached: prefill never touches a task's penalties or random
stream, so a task that starts from a cached prefix generates what it would have without it.

Memory: every entry counts its state bytes + 4 bytes per stored token + ``ENTRY_OVERHEAD``. The
most recently used entries stay on the engine's device (up to ``device_bytes``: the hot tier);
older ones move to host memory (pinned on CUDA); past ``max_bytes`` the least recently used are
dropped. A hit on a host entry moves it back to the device. ``max_bytes == 0`` disables the cache.
The move of an entry to the host (a copy over PCIe: ~0.4 ms for a 2.9B state on the H200
machine) may wait for ``settle``: on a request's way to its first token (an insert with
``defer``, a hit that brings an entry back) the device tier may exceed its budget by what such
calls added since the last settle, up to ``DEFER_MAX`` entries, until the scheduler settles the
cache after its step, so that the copy does not sit on the device's queue between the prefill
pass and the first token's sampling (a cached chat turn inserts two: its last turn boundary
and its whole prompt).

Thread-safety: the scheduler thread calls everything; other threads may call ``stats`` and
``clear`` (one lock guards the tables).
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_right, insort
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from server.model.state import State
from server.scheduler.host_arena import HostArena

HASH_MODS = np.array([2_147_483_647, 2_147_483_629], dtype=np.uint64)  # primes < 2**31
HASH_BASES = np.array([1_000_003, 700_001], dtype=np.uint64)
HASH_LOW = (1 << 31) - 1  # the second hash's bits in a packed value
ENTRY_OVERHEAD = 512  # bytes of bookkeeping counted per entry
MIN_TOKENS = 16  # shorter prefixes are not worth a state copy
DEFER_MAX = 4  # entries whose moves to the host may wait for ``settle`` (module docstring)
_powers = np.ones((1, 2), dtype=np.uint64)  # [i, m] = HASH_BASES[m] ** i mod HASH_MODS[m]


def _hash_powers(n: int) -> np.ndarray:
    """The first ``n`` powers of each base (grown by doubling: p[k:2k] = p[:k] * B^k)."""
    global _powers
    p = _powers
    while len(p) < n:
        step = (p[-1] * HASH_BASES) % HASH_MODS  # B^k, k = len(p)
        p = np.concatenate([p, (p * step) % HASH_MODS])  # products < 2**62: exact in uint64
    _powers = p
    return p[:n]


def prefix_hashes(tokens, known: array | None = None) -> array:
    """``out[i]`` = hash of ``tokens[:i]`` for i in 0..len(tokens) (array of uint64): per modulus
    m, ``sum_j (tokens[j] + 1) * B_m^j mod p_m`` (j < i), the two packed as ``h0 << 31 | h1``.
    Vectorised (a cumulative sum): ~2 ms for 128k tokens, where a Python loop took ~28 ms on the
    scheduler's thread. ``known``: the hashes of a sequence sharing the first ``len(known) - 1``
    tokens, reused (a chat's previous turn)."""
    n = len(tokens)
    m = 0 if known is None else min(len(known) - 1, n)
    out = np.empty(n + 1, dtype=np.uint64)
    if m:
        out[:m + 1] = np.frombuffer(known, dtype=np.uint64, count=m + 1)
    else:
        out[0] = 0
    if n > m:
        ids = (np.frombuffer(tokens, dtype=tokens.typecode, count=n)[m:]
               if isinstance(tokens, array) else np.asarray(tokens[m:]))
        terms = (ids.astype(np.uint64)[:, None] + 1) * _hash_powers(n)[m:] % HASH_MODS  # < 2**63
        start = np.array([out[m] >> np.uint64(31), out[m] & np.uint64(HASH_LOW)], np.uint64)
        h = (np.cumsum(terms, axis=0, dtype=np.uint64) + start) % HASH_MODS  # sums < 2**63
        out[m + 1:] = (h[:, 0] << np.uint64(31)) | h[:, 1]
    return array("Q", out.tobytes())


def common_prefix(a: array, b: array) -> int:
    """Length of the common prefix of two sequences, from their ``prefix_hashes``."""
    lo, hi = 0, min(len(a), len(b)) - 1  # a[lo] == b[lo] always (empty prefix)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[mid] == b[mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def to_host(state: State) -> State:
    """A host-memory copy of ``state``. From CUDA it goes into pinned memory without waiting for
    the device (a synchronous copy stalled the scheduler ~15 ms per 2.9B state, measured on the
    H200): every later use of the entry is a copy back to the device queued on the same stream,
    so it reads the finished data; nothing reads a host entry's tensors on the CPU."""
    return State(_host_copy(state.shift), _host_copy(state.wkv))


def _host_copy(t: torch.Tensor) -> torch.Tensor:
    """A host copy of ``t`` (as ``to_host``'s: pinned from CUDA, not awaited)."""
    if t.device.type != "cuda":
        return t.to(device="cpu")
    h = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    return h.copy_(t, non_blocking=True)


def _nbytes(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def state_nbytes(state: State) -> int:
    return _nbytes(state.shift) + _nbytes(state.wkv)


@dataclass(eq=False)
class Entry:
    key: tuple  # (origin, n, hash)
    tokens: array  # uint32 tokens[:n]
    state: State  # batch 1
    nbytes: int
    hot: bool  # on the device
    row: int | None = None  # its row of the host arena while on the host
    logits: torch.Tensor | None = None  # [V] after its last token, on its tier


class PrefixCache:
    def __init__(self, max_bytes: int, device="cpu", device_bytes: int | None = None,
                 min_tokens: int = MIN_TOKENS, arena: bool | None = None, vocab: int = 0):
        self.max_bytes = max(0, int(max_bytes))
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:  # compare equal to states'
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.device_bytes = self.max_bytes // 2 if device_bytes is None else int(device_bytes)
        # host tier in pinned slots (host_arena.py): on CUDA unless ``arena`` says otherwise;
        # ``vocab``: each row also holds a whole prompt's logits (the model's vocabulary size)
        cuda = self.device.type == "cuda"
        self.arena = (HostArena(self.max_bytes - self.device_bytes, pin=cuda, vocab=vocab)
                      if (cuda if arena is None else arena) else None)
        self.min_tokens = min_tokens
        self._lock = threading.Lock()
        self._lru: OrderedDict[tuple, Entry] = OrderedDict()  # every entry, least recent first
        self._hot: OrderedDict[tuple, Entry] = OrderedDict()  # device entries, least recent first
        self._lengths: dict[str, list[int]] = {}  # origin -> sorted n of its entries (repeats)
        self.bytes = self.hot_bytes = 0
        self._put_off = [0, 0]  # entries and bytes whose moves wait for settle
        self.hits = self.misses = self.tokens_saved = self.inserts = self.evictions = 0

    def reserve_host(self, state: State) -> None:
        """Allocate the host arena now for states like ``state`` (a server's start) rather
        than at the first move (~0.3 s for 512 MB of pinned memory on the H200 machine)."""
        if self.arena is not None and self.arena.slots == 0 and self.arena.budget_bytes > 0:
            self.arena.allocate(state)

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    # ---- lookups -----------------------------------------------------------------------
    def lookup(self, origin: str, hashes: array, tokens: array, lo: int, hi: int,
               logits_at: int | None = None, align: int = 1, base: int = 0):
        """The longest cached prefix ``tokens[:n]`` with ``lo < n <= hi`` (at ``n == logits_at``
        only an entry with logits), ``n - base`` a multiple of ``align`` unless ``n`` is
        ``logits_at``:
        ``(n, state, logits)`` (the cache's own tensors: read them, never write them; logits
        None unless kept) or None."""
        with self._lock:
            lengths = self._lengths.get(origin)
            if not lengths:
                return None
            top = bisect_right(lengths, hi)
            candidates = (lengths[i] for i in range(top - 1, -1, -1))
            if top > hi - lo:  # more entries than positions: walk the positions
                candidates = range(hi, lo, -1)
            seen = None
            for n in candidates:
                if n <= lo:
                    break
                if n == seen or ((n - base) % align and n != logits_at):
                    continue
                seen = n
                entry = self._lru.get((origin, n, hashes[n]))
                if entry is not None and entry.tokens == tokens[:n] and (
                        n != logits_at or entry.logits is not None):
                    self._touch(entry)
                    logits = entry.logits
                    if n == logits_at and not entry.hot:  # (no room on the device tier; a
                        # copy: read at the next pulse, after inserts that may reuse its row)
                        logits = logits.to(self.device, non_blocking=True, copy=True)
                    return n, entry.state, logits
        return None

    def contains(self, key: tuple, logits: bool = False) -> bool:
        """``logits``: only an entry that has them."""
        with self._lock:
            entry = self._lru.get(key)
            return entry is not None and (not logits or entry.logits is not None)

    def key(self, origin: str, hashes: array, n: int) -> tuple:
        return (origin, n, hashes[n])

    # ---- inserting --------------------------------------------------------------------
    def insert(self, key: tuple, tokens: array, state: State,
               logits: torch.Tensor | None = None, defer: bool = False) -> bool:
        """Keep ``state`` (batch 1, a copy the cache may own) for ``tokens`` (= ``tokens[:n]``
        of ``key``), and ``logits`` after its last token if given (a copy it may own). False if
        it is already there (it is refreshed), too short or too big. ``defer``: moves to the
        host tier may wait for ``settle`` (module docstring)."""
        origin, n, _ = key
        hot = state.device == self.device and self.device_bytes > 0
        nbytes = state_nbytes(state) + 4 * n + ENTRY_OVERHEAD + _nbytes(logits)
        if n < self.min_tokens or nbytes > self.max_bytes:
            return False
        with self._lock:
            old = self._lru.get(key)
            if old is not None:
                if logits is not None and old.logits is None and old.tokens == tokens:
                    # (the same tokens: not a hash collision's)
                    self._add_logits(old, state, logits, defer)
                else:
                    self._touch(old)
                return False
            entry = Entry(key, tokens, state, nbytes, hot, logits=logits)
            if not hot:
                self._to_host(entry)
            self._lru[key] = entry
            if hot:
                self._hot[key] = entry
            insort(self._lengths.setdefault(origin, []), n)
            self.inserts += 1
            self._grow(nbytes, hot, defer)
        return True

    def _add_logits(self, entry: Entry, state: State, logits: torch.Tensor,
                    defer: bool) -> None:
        """(under the lock) ``entry`` (kept without them first: a whole prompt fed with others)
        takes a lone pass's ``logits``; on the host, it comes back to the device with ``state``
        (of the same tokens, in hand: no copy back from the host) where the device tier has room
        for both, else they join it on the host, whose state stays (no state copy on the
        request's way to its first token; split-invariant, the bits of ``state``: an entry kept
        without logits comes from a pass that keeps them, at a multiple of ``align``)."""
        moved, extra = 0, _nbytes(logits)
        if not entry.hot and self.device_bytes >= entry.nbytes + extra:
            self._release_row(entry)
            entry.state, entry.hot, moved = state, True, entry.nbytes
            self._hot[entry.key] = entry
        entry.logits = logits if entry.hot else self._host_logits(logits, entry.row)
        entry.nbytes += extra
        self.bytes += extra
        if entry.hot:
            self.hot_bytes += moved + extra
        self._touch(entry)  # (on the host it stays there: no room)
        over = self._defer(moved + extra) if entry.hot else self._put_off[1]
        self._rebalance(over=over if defer else 0)

    def _grow(self, nbytes: int, hot: bool, defer: bool) -> None:
        """(under the lock) ``nbytes`` more held, on the device tier if ``hot``; then the tiers
        back within their budgets (``defer``: see ``insert``)."""
        self.bytes += nbytes
        if hot:
            self.hot_bytes += nbytes
        self._rebalance(over=self._defer(nbytes) if defer else 0)

    def settle(self) -> None:
        """Move what ``defer`` and hits left over the device tier's budget to the host."""
        with self._lock:
            self._put_off = [0, 0]
            self._rebalance()

    # ---- accounting --------------------------------------------------------------------
    def count_lookup(self, hit: bool) -> None:
        """Record a task's lookup outcome (once per task: both counters only ever grow, as
        Prometheus counters must)."""
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def count_saved(self, n: int) -> None:
        with self._lock:
            self.tokens_saved += n

    def stats(self) -> dict:
        with self._lock:
            looked = self.hits + self.misses
            return {"enabled": self.enabled, "entries": len(self._lru),
                    "device_entries": len(self._hot), "bytes": self.bytes,
                    "device_bytes": self.hot_bytes, "max_bytes": self.max_bytes,
                    "max_device_bytes": self.device_bytes, "hits": self.hits,
                    "misses": self.misses, "hit_rate": self.hits / looked if looked else 0.0,
                    "tokens_saved": self.tokens_saved, "inserts": self.inserts,
                    "evictions": self.evictions}

    def clear(self) -> None:
        """Drop every entry (frees their device memory); counters are kept."""
        with self._lock:
            self._lru.clear()
            self._hot.clear()
            self._lengths.clear()
            self.bytes = self.hot_bytes = 0
            self._put_off = [0, 0]
            if self.arena is not None:
                self.arena.reset()

    # ---- internals (caller holds the lock) ------------------------------------------------
    def _touch(self, entry: Entry) -> None:
        self._lru.move_to_end(entry.key)
        if entry.hot:
            self._hot.move_to_end(entry.key)
        elif self.device_bytes >= entry.nbytes:  # promote: the next load reads device memory
            st = entry.state  # pinned on CUDA: the copy need not wait; a copy even on the
            # same device, as the arena row it may come from is handed back
            entry.state = State(st.shift.to(self.device, non_blocking=True, copy=True),
                                st.wkv.to(self.device, non_blocking=True, copy=True))
            if entry.logits is not None:  # (a copy, as the state's: the row's logits area)
                entry.logits = entry.logits.to(self.device, non_blocking=True, copy=True)
            self._release_row(entry)
            entry.hot = True
            self._hot[entry.key] = entry
            self.hot_bytes += entry.nbytes
            self._rebalance(over=self._defer(entry.nbytes))  # (a lookup: on a request's way)

    def _defer(self, nbytes: int) -> int:
        """An entry of ``nbytes`` joins those whose moves wait for ``settle`` (up to
        ``DEFER_MAX`` of them); returns the bytes the device tier may now exceed its budget by."""
        if self._put_off[0] < DEFER_MAX:
            self._put_off[0] += 1
            self._put_off[1] += nbytes
        return self._put_off[1]

    def _rebalance(self, over: int = 0) -> None:
        """Drop entries past ``max_bytes``; move the device tier's oldest to the host while it
        holds more than ``device_bytes + over``."""
        # drop first: an entry about to be dropped is not copied to the host, and the host rows
        # of dropped entries are free for the moves that follow
        while self.bytes > self.max_bytes and self._lru:
            self._drop(next(iter(self._lru.values())))
        while self.hot_bytes > self.device_bytes + over and self._hot:
            cold = next(iter(self._hot.values()))
            self._to_host(cold)  # (first: where it fails, the entry stays a device one)
            del self._hot[cold.key]
            cold.hot = False
            self.hot_bytes -= cold.nbytes

    def _to_host(self, entry: Entry) -> None:
        """Move an entry's state to the host tier: an arena row if one is free, else its own
        (pinned on CUDA) memory; its logits, if any, with it (the row's logits area: no pinned
        memory allocated, else their own). Where a copy fails the entry is left as it was."""
        put = self.arena.put(entry.state) if self.arena is not None else None
        try:
            state, row = put if put is not None else (to_host(entry.state), None)
            logits = None if entry.logits is None else self._host_logits(entry.logits, row)
        except BaseException:
            if put is not None:
                self.arena.release(put[1])
            raise
        entry.state, entry.row, entry.logits = state, row, logits

    def _host_logits(self, logits: torch.Tensor, row: int | None) -> torch.Tensor:
        """A host copy of a whole prompt's ``logits`` for an entry in arena ``row`` (None: in
        its own memory): in the row's logits area, else their own (pinned on CUDA) memory."""
        out = self.arena.put_logits(row, logits) if row is not None else None
        return _host_copy(logits) if out is None else out

    def _release_row(self, entry: Entry) -> None:
        if entry.row is not None:
            self.arena.release(entry.row)
            entry.row = None

    def _drop(self, entry: Entry) -> None:
        self._release_row(entry)
        del self._lru[entry.key]
        if entry.hot:
            del self._hot[entry.key]
            self.hot_bytes -= entry.nbytes
        self.bytes -= entry.nbytes
        origin, n, _ = entry.key
        lengths = self._lengths[origin]
        lengths.pop(bisect_right(lengths, n) - 1)
        if not lengths:
            del self._lengths[origin]
        self.evictions += 1
