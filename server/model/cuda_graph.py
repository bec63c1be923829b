"""CUDA-graph replay of the decode step: one launch instead of ~60 small kernels per layer.

A graph is captured per (state tensors, batch size, masked or not): it bakes in the state's
addresses, so the engine's slot state (reallocated only on resize) reuses its graph step after
step. Inputs (tokens, active mask) are copied into static buffers before each replay; the
logits (a buffer outside the graphs' pool, shared by the graphs on one state: ``_out``) are
returned as a copy, or borrowed until the caller's next replay (``copy=False``).
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch
from loguru import logger
from torch import Tensor

from server.model.state import State

# Held while a graph is captured. Another thread that issues CUDA work (the scheduler's
# copy-back thread) takes it too: CUDA forbids unsafe calls from other threads during a capture.
CAPTURE_LOCK = threading.Lock()


@contextmanager
def capturing(graph: torch.cuda.CUDAGraph, pool):
    """``torch.cuda.graph`` with Python's garbage collector off: a CUDA graph freed by a
    collection during the capture (e.g. a dropped model's, held in a reference cycle) is reset
    there, which CUDA forbids; the capture then fails ("operation failed due to a previous error
    during capture", seen in the GPU tests, where models come and go); it is collected after."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        with torch.cuda.graph(graph, pool=pool):
            yield
    finally:
        if was_on:
            gc.enable()


_WARMUP_STREAMS: dict[torch.device, torch.cuda.Stream] = {}


def warmup_stream(dev) -> torch.cuda.Stream:
    """The one side stream on which every capture's warm-up runs (per device). cuBLAS keeps a
    workspace (32 MiB on Hopper) for each stream it has run on, for the process's life: a new
    stream per capture left one behind for each (~64 MiB a model with two graphs; up to the
    stream pool's 32 streams, ~1 GiB, at a server's ~40 captures; session 59)."""
    dev = torch.device(dev)
    if dev not in _WARMUP_STREAMS:
        _WARMUP_STREAMS[dev] = torch.cuda.Stream(dev)
    return _WARMUP_STREAMS[dev]


def _weakly(fn: Callable) -> Callable[[], Callable]:
    """A getter for ``fn`` that holds a bound method weakly: the model owns the graph objects,
    so a strong hold on its methods would make a reference cycle, and a dropped model's weights
    and graphs would stay on the device until a full garbage collection (13.3B's fp16 and fp32
    copies ran out of an H100's memory that way in ``test_every_preset_is_finite_in_fp16``)."""
    return weakref.WeakMethod(fn) if hasattr(fn, "__self__") else lambda: fn


# (tokens [B], state, active, out=[B, V] or None) -> [B, V] (``out`` itself when given)
StepFn = Callable[..., Tensor]


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    tokens: Tensor  # [B] long, static input
    active: Tensor | None  # [B] bool, static input
    logits: Tensor  # [B, V] float32, static output: rows of a buffer shared (``_out``)


class GraphedDecode:
    """Wraps an eager decode step ``step(tokens, state, active, out=None)`` (``out``: the
    [B, V] fp32 logits buffer it writes and returns); keeps at most ``max_graphs`` graphs
    (least recently used dropped first)."""

    def __init__(self, step: StepFn, max_graphs: int = 8):
        self._step = _weakly(step)
        self.max_graphs = max_graphs
        self.graphs: OrderedDict[tuple, _Graph] = OrderedDict()
        self.pool = None  # one memory pool shared by every graph
        self._outs: dict[tuple, Tensor] = {}  # logits buffers, by state storage (``_out``)
        self.captures: list[tuple[int, float]] = []  # (batch, ms) of each capture, warm-up included

    @property
    def step(self) -> StepFn:
        return self._step()

    def clear(self) -> None:
        """Drop every graph (and their memory pool): e.g. after the state buffer is reallocated."""
        self.graphs.clear()
        self._outs.clear()
        self.pool = None

    @staticmethod
    def _key(state: State, masked: bool) -> tuple:
        s, w = state.shift, state.wkv
        return (s.data_ptr(), w.data_ptr(), tuple(s.shape), tuple(w.shape), s.dtype, w.dtype,
                s.stride(), w.stride(), masked)

    def __call__(self, tokens: Tensor, state: State, active: Tensor | None,
                 copy: bool = True) -> Tensor:
        key = self._key(state, active is not None)
        g = self.graphs.get(key)
        if g is None:
            t0 = time.perf_counter()
            with CAPTURE_LOCK:  # (the eviction and pruning too: another thread may capture)
                try:
                    g = self._capture(tokens, state, active)
                    self.graphs[key] = g
                    while len(self.graphs) > self.max_graphs:
                        self.graphs.popitem(last=False)
                finally:  # (a failed capture's logits buffer goes too, unless a graph uses it)
                    self._prune()
            ms = (time.perf_counter() - t0) * 1e3
            self.captures.append((tokens.shape[0], ms))
            logger.info(f"Captured the decode graph for batch {tokens.shape[0]} in {ms:.1f} ms")
        else:
            try:
                self.graphs.move_to_end(key)
            except KeyError:  # another thread's capture evicted it since the get: it is still
                pass  # whole (g holds it) and replays this once more
        g.tokens.copy_(tokens, non_blocking=True)
        if active is not None:
            g.active.copy_(active, non_blocking=True)
        g.graph.replay()
        return g.logits.clone() if copy else g.logits

    def _capture(self, tokens: Tensor, state: State, active: Tensor | None) -> _Graph:
        dev = state.device
        with torch.inference_mode(False):  # normal tensors: writable in and out of inference mode
            static_tokens = torch.zeros(tokens.shape, dtype=torch.long, device=dev)
            static_active = None if active is None else torch.zeros(active.shape,
                                                                    dtype=torch.bool, device=dev)
        # warm-up (lazy library init, autotuning) on the real state with every row inactive:
        # inactive rows are left bit-for-bit unchanged, so the warm-up has no effect on it
        idle = torch.zeros(tokens.shape, dtype=torch.bool, device=dev)
        side = warmup_stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(2):
                V = self.step(static_tokens, state, idle).shape[-1]
        torch.cuda.current_stream(dev).wait_stream(side)
        # the output outside the graphs' pool: a block a later capture could be given there is
        # one an earlier graph's replay writes (its working memory), so another engine's replay
        # between this one's and its read would change these logits (session 63's review)
        logits = self._out(state, tokens.shape[0], V)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        try:
            with capturing(graph, self.pool):
                self.step(static_tokens, state, static_active, out=logits)
        except Exception:
            self.pool = None  # a failed capture's pool is not reused (the next one gets its own)
            raise
        return _Graph(graph, static_tokens, static_active, logits)

    def _prune(self) -> None:
        """Drop the logits buffers no graph uses (under CAPTURE_LOCK; ``list`` takes the
        graphs at once, as another thread's ``move_to_end`` may reorder them)."""
        live = {g.logits.untyped_storage().data_ptr() for g in list(self.graphs.values())}
        self._outs = {k: t for k, t in self._outs.items()
                      if t.untyped_storage().data_ptr() in live}

    def _out(self, state: State, rows: int, V: int) -> Tensor:
        """The first ``rows`` rows of the [R, V] fp32 logits buffer of ``state``'s storage:
        every graph on views of one state (an engine's capacities are views of its
        full-size state of R rows) writes the same buffer. An engine replays one graph at a
        time and reads its logits before the next replay, so they can share it; a graph's own
        logits would hold twice the largest one's (128 MiB at 256 rows of a 65,536 vocabulary
        over 1..256). Another state (another engine) has its own buffer."""
        w = state.wkv
        R = max(rows, w.stride(0) // max(w.stride(1), 1) if w.dim() == 5 else rows)
        key = (w.untyped_storage().data_ptr(), R, V)
        buf = self._outs.get(key)
        if buf is None:
            with torch.inference_mode(False):  # writable in and out of inference mode
                buf = self._outs[key] = torch.empty(R, V, dtype=torch.float32, device=w.device)
        return buf[:rows]


@dataclass
class _PrefillGraph:
    graph: torch.cuda.CUDAGraph | None  # None: run eagerly (CPU; tests of the padding)
    tokens: Tensor  # [1, T] long, static input (padded)
    nm: Tensor  # [1 + MID_POINTS] long: valid tokens, then the export points (``mid``; 0: none)

    @property
    def n(self) -> Tensor:
        return self.nm[:1]


MID_POINTS = 2  # states a prefill pass hands out at most (``RWKV7.prefill``'s ``mid``)
# (tokens, state, keep, last, mid, mid_state) -> x
PrefillFn = Callable[[Tensor, State, Tensor, Tensor, Tensor, State], Tensor]


class GraphedPrefill:
    """Prefill passes of one sequence replayed from CUDA graphs, one graph per length
    bucket (``bucket``: steps of 16 tokens up to 256, of 32 up to 512, then of 256 up to the
    model's prefill chunk). An eager pass is bound by the
    host's launch rate (~20-25 ms for a 2.9B model whatever the length, measured on the H200),
    which dominated the time to first token of short prompts and cached chat turns.

    The pass is padded to its bucket with identity steps (``keep`` false past ``n``; the state
    and the token-shift vectors are taken at token ``n - 1``), so one graph serves every length
    of its bucket. Graphs work on a private one-row state: the caller's state (any address) is
    copied in and back around the replay. ``graphs=False`` runs the same padded pass eagerly.
    The export points (``mid``: the states after that many tokens, ``RWKV7.prefill``) are an
    input of every graph: a private state of MID_POINTS rows receives them, copied out where
    asked for. Each graph copies the residual at every position into one buffer shared by all
    (``out``, [bucket(max_tokens), C] fp32): a prefill reads its last row, a scoring pass
    (``every``, ``RWKV7.score``) all of them."""

    # (up to this many tokens, buckets this many apart), then multiples of STEP
    FINE = ((256, 16), (512, 32))
    STEP = 256

    def __init__(self, forward: PrefillFn, new_state: Callable[[int], State], graphs: bool = True,
                 max_tokens: int = 1024):
        self._forward, self._new_state = _weakly(forward), _weakly(new_state)
        self.use_graphs = graphs
        self.max_tokens = max_tokens  # (the longest pass served: the model's prefill chunk)
        self.graphs: dict[int, _PrefillGraph] = {}
        self.state: State | None = None
        self.mid_state: State | None = None  # the export's, when captured
        self.out: Tensor | None = None  # every graph's residuals, made at the first capture
        self.pool = None
        self._lock = threading.Lock()

    def bucket(self, n: int) -> int:
        """Multiples of 16 up to 256 tokens, of 32 up to 512, then of ``STEP``: padding costs
        compute in proportion (a pass of 554 tokens padded to 1,024 took ~2x its time; a
        189-token pass padded to 256 took 7.4 ms, its kernels 5.5 ms unpadded: H200, 2.9B),
        while each bucket is one more graph to capture at start. A cached chat turn's pass is
        its new message and up to 15 tokens fed again (~150-170 tokens in ``server.bench
        ttft``): steps of 16 pad it by 8 tokens on average, and 16 is the split-invariant
        model's alignment on CUDA (a multiple of it is never padded)."""
        for up_to, step in self.FINE:
            if n <= up_to:
                break
        else:
            step = self.STEP
        return max(1, -(-n // step)) * step

    def _step(self, g: _PrefillGraph, state: State, mid_state: State | None) -> Tensor:
        """The padded pass; returns the residual at every position, [T, C]."""
        T = g.tokens.shape[1]
        keep = torch.arange(T, device=g.tokens.device)[None, :] < g.n[:, None]
        mid = None if mid_state is None else g.nm[1:1 + mid_state.batch_size]
        return self._forward()(g.tokens, state, keep, g.n - 1, mid, mid_state, True)[0]

    def __call__(self, tokens: list[int], state: State, mid: list[int] = (),
                 mid_state: State | None = None, every: bool = False) -> Tensor:
        """Feed ``tokens`` (at most ``max_tokens``) into ``state`` (one row, in place); returns
        x at the last token, [1, C] (``every``: at each token, [n, C]); for each k with
        ``mid[k]`` > 0, the state after that many tokens into row k of ``mid_state`` too.
        Calls from several threads take turns (the graphs share one private state)."""
        if not 0 < len(tokens) <= self.max_tokens:
            raise ValueError(f"a graphed prefill pass takes 1-{self.max_tokens} tokens, "
                             f"not {len(tokens)}")
        with self._lock:
            x = self._run(tokens, state, list(mid) if mid_state is not None else [],
                          mid_state)
            n = len(tokens)
            return x[:n].clone() if every else x[n - 1:n].clone()

    def _run(self, tokens: list[int], state: State, mid: list[int],
             mid_state: State | None) -> Tensor:
        """The pass; returns the residual at every position of its bucket, [T, C] (the shared
        buffer after a replay: read before the next)."""
        n, dev = len(tokens), state.device
        T = self.bucket(n)
        host = torch.zeros(T + 1 + MID_POINTS, dtype=torch.long, pin_memory=dev.type == "cuda")
        host[:n] = torch.as_tensor(tokens, dtype=torch.long)
        host[T] = n
        if mid:
            host[T + 1:T + 1 + len(mid)] = torch.as_tensor(mid, dtype=torch.long)
        g = self.graphs.get(T)
        if g is None:
            g = self._make(T, dev)
        g.tokens.copy_(host[:T].view(1, T), non_blocking=True)
        g.nm.copy_(host[T:], non_blocking=True)
        if g.graph is None:
            return self._step(g, state, mid_state if mid else None)
        self.state.shift.copy_(state.shift)
        self.state.wkv.copy_(state.wkv)
        g.graph.replay()
        state.shift.copy_(self.state.shift)
        state.wkv.copy_(self.state.wkv)
        for k, m in enumerate(mid):
            if m:
                mid_state.shift[:, :, k].copy_(self.mid_state.shift[:, :, k])
                mid_state.wkv[:, k].copy_(self.mid_state.wkv[:, k])
        return self.out[:T]

    def _make(self, T: int, dev) -> _PrefillGraph:
        with torch.inference_mode(False):
            g = _PrefillGraph(None, torch.zeros(1, T, dtype=torch.long, device=dev),
                              torch.tensor([1] + [0] * MID_POINTS, dtype=torch.long,
                                           device=dev))
        if self.use_graphs:
            t0 = time.perf_counter()
            try:
                with CAPTURE_LOCK:
                    self._capture(g, dev)
            except Exception as e:  # e.g. out of memory: this bucket runs eagerly from now on
                logger.warning(f"prefill graph for {T} tokens not captured ({e!r:.200}): "
                               "eager passes for this length")
                g.graph = None
                self.pool = None  # not reused after a failed capture: the next gets its own
            else:
                logger.info(f"Captured the prefill graph for {T} tokens in "
                            f"{(time.perf_counter() - t0) * 1e3:.1f} ms")
        self.graphs[T] = g
        return g

    def _capture(self, g: _PrefillGraph, dev) -> None:
        if self.state is None:
            with torch.inference_mode(False):
                new_state = self._new_state()
                self.state, self.mid_state = new_state(1), new_state(MID_POINTS)
        side = warmup_stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):  # warm-up (kernel compilation, library init)
            for _ in range(2):
                C = self._step(g, self.state, self.mid_state).shape[-1]
        torch.cuda.current_stream(dev).wait_stream(side)
        if self.out is None:  # (outside the graphs' pool: no graph's capture frees it)
            with torch.inference_mode(False):
                self.out = torch.empty(self.bucket(self.max_tokens), C, dtype=torch.float32,
                                       device=dev)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with capturing(graph, self.pool):
            self.out[:g.tokens.shape[1]].copy_(self._step(g, self.state, self.mid_state))
        g.graph = graph
