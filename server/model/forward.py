"""RWKV7: the batched forward used by the engine — prefill of many prompts and one-token decode.

Numerics (fp16/bf16 safety): weights are cast to the run dtype once at load; the residual stream,
LayerNorm/GroupNorm, decay, key normalisation and the WKV state math stay in fp32; matmul inputs
and outputs are in the run dtype. ``blocks.0.ln0`` is folded into the embedding at load.

Rows that must not advance (padding after a prompt's end, inactive decode rows) get an identity
step: decay 1 and k = v = kappa = 0, so their WKV state is left bit-for-bit unchanged, and their
token-shift vectors are kept. The WKV functions are attributes (``wkv_step``/``wkv_chunk``):
the Triton kernels of server/model/kernels on CUDA, wkv.py (same contract) elsewhere.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from loguru import logger
from torch import Tensor

from server.model import row_invariance, wkv
from server.model.checkpoint import ModelConfig, finite_weight
from server.model.cuda_graph import CAPTURE_LOCK, MID_POINTS, GraphedDecode, GraphedPrefill
from server.model.embedding import build_table, embed
from server.model.fused import FusedBlocks, check_fused, fused_default, linear_logits
from server.model.layer_weights import LayerWeights, layer_weights
from server.model.pass_groups import plan_passes
from server.model.reference import GN_EPS, LN_EPS
from server.model.sampler import token_logprobs
from server.model.small_pack import pack_small_tensors
from server.model.state import State, rows_on, to_device, use_device

DECAY_SCALE = math.exp(-0.5)  # decay = exp(-e^-0.5 · sigmoid(w))


def _normalise(device) -> torch.device:
    """"cuda" -> "cuda:<current>", so it compares equal to the device of tensors made on it."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _wkv_functions(device: torch.device, impl: str, split_invariant: bool):
    """(wkv_step, wkv_chunk): the Triton kernels (server/model/kernels) on CUDA when they import
    and ``impl`` is "auto" or "triton" (with their ``split_invariant`` option); the plain-torch
    wkv.py otherwise (or for "torch")."""
    if impl not in ("auto", "torch", "triton"):
        raise ValueError(f"wkv_impl must be auto, torch or triton, not {impl!r}")
    if impl != "torch" and device.type == "cuda":
        from server.model import kernels

        if kernels.HAS_TRITON:
            chunk = (functools.partial(kernels.wkv_chunk, split_invariant=True)
                     if split_invariant else kernels.wkv_chunk)
            return kernels.wkv_step, chunk
    if impl == "triton":
        raise RuntimeError("wkv_impl='triton' needs CUDA and an importable Triton")
    chunk = functools.partial(wkv.wkv_chunk, round_chunks=True) if split_invariant \
        else wkv.wkv_chunk
    return wkv.wkv_step, chunk


def _wkv_chunk_tokens(wkv_chunk) -> int:
    """Tokens per chunk of a WKV prefill function: its sums over a chunk are computed at once,
    so a pass starting inside a chunk of another cut of the same sequence rounds differently."""
    if getattr(wkv_chunk, "func", wkv_chunk) is wkv.wkv_chunk:
        return wkv.SUB
    from server.model.kernels import wkv_triton

    return wkv_triton.CHUNK


def _default_dtype(device: torch.device) -> torch.dtype:
    return torch.float16 if device.type == "cuda" else torch.float32


class RWKV7:
    """Batched RWKV-7 forward (see docs/architecture.md). ``prefill_chunk`` tokens of each prompt
    go through the layers at a time, at most ``prefill_tokens`` tokens (rows x chunk) per pass,
    rows of like lengths together (``pass_groups``: a pass pads its rows to its longest).
    On CUDA, decode replays a captured CUDA graph (``cuda_graphs=False``: run eagerly), the
    WKV recurrence runs in the Triton kernels (``wkv_impl="torch"``: plain torch, wkv.py) and
    the element-wise work around it in fused Triton kernels (``fused=False``, setting ``RWKV_FUSED=false``:
    plain torch; see fused.py). ``prefill_chunk`` defaults to 256 on the CPU, 1024 on CUDA."""

    def __init__(self, state_dict: dict[str, Tensor], cfg: ModelConfig, device="cpu",
                 dtype: torch.dtype | None = None, state_dtype: torch.dtype = torch.float32,
                 prefill_chunk: int | None = None, prefill_tokens: int = 16384,
                 cuda_graphs: bool = True, wkv_impl: str = "auto", fused: bool | None = None,
                 split_invariant: bool = True):
        self.cfg = cfg
        self.device = _normalise(device)
        use_device(self.device)  # (this thread's: the loading, warm-up and capture)
        self.dtype = dtype or _default_dtype(self.device)
        self.state_dtype = state_dtype
        if prefill_chunk is None:  # larger matrix products on the GPU
            prefill_chunk = 1024 if self.device.type == "cuda" else 256
        self.prefill_chunk, self.prefill_tokens = prefill_chunk, prefill_tokens
        dev, dt = self.device, self.dtype
        ln0_w, ln0_b = (state_dict[f"blocks.0.ln0.{n}"].float() for n in ("weight", "bias"))
        # [V, C], ln0 folded in; on CUDA in pinned host memory (embedding.py)
        self.emb = build_table(state_dict["emb.weight"], ln0_w, ln0_b, LN_EPS, dev, dt)
        self.layers: list[LayerWeights] = [layer_weights(state_dict, cfg, i, dev, dt)
                                           for i in range(cfg.n_layer)]
        self.ln_out = tuple(state_dict[f"ln_out.{n}"].to(dev, torch.float32)
                            for n in ("weight", "bias"))
        self.head = state_dict["head.weight"].to(dev, dt)  # [V, C]
        for key, t in (("blocks.0.ln0.weight", ln0_w), ("blocks.0.ln0.bias", ln0_b),
                       ("emb.weight", self.emb), ("ln_out.weight", self.ln_out[0]),
                       ("ln_out.bias", self.ln_out[1]), ("head.weight", self.head)):
            finite_weight(key, t, state_dict[key])  # (the layers' weights: layer_weights)
        self.wkv_impl = wkv_impl
        # split_invariant: prefill gives the same bits however a sequence is cut into passes
        # at multiples of ``prefill_align`` tokens (the WKV's chunk), so the prefix cache changes
        # no output (products over the slices of K that keep a row's bits, row_invariance.py;
        # one ln_mix program per prefill row; the chunked WKV at every length; the scheduler
        # cuts prompts at such multiples)
        self.split_invariant = split_invariant
        self.wkv_step, self.wkv_chunk = _wkv_functions(self.device, wkv_impl, split_invariant)
        self.prefill_align = _wkv_chunk_tokens(self.wkv_chunk)  # (prefill_chunk: a multiple)
        # the plain forward's products: slices of K, by weight (None: not chosen yet; set
        # before ``_check_fused``, which runs the plain forward)
        self._slices: dict[str, int] | None = None
        use_fused = fused_default(self.device) if fused is None else fused
        self._fused = FusedBlocks(self) if use_fused else None
        if self._fused is not None:  # (on the CPU only under Triton's interpreter: tests)
            self._check_fused()
        if split_invariant:
            self.set_split_invariant(True)  # (checked)
        if self.device.type == "cuda":  # before any capture: the graphs read the weights there
            with CAPTURE_LOCK:  # (no freeing while another thread's model captures a graph)
                pack_small_tensors(self.layers + (self._fused.stacks if self._fused else []),
                                   dev)
                torch.cuda.empty_cache()  # the small segments the loading left, now empty
        use_graphs = cuda_graphs and self.device.type == "cuda"
        self._graphed = GraphedDecode(self._decode_step, max_graphs=16) if use_graphs else None
        # single-sequence prefill passes from graphs too (an eager pass is launch-bound)
        self._graphed_prefill = (GraphedPrefill(self._forward, self.new_state,
                                                max_tokens=prefill_chunk)
                                 if use_graphs else None)

    def set_split_invariant(self, on: bool) -> None:
        """Switch split invariance (the constructor's ``split_invariant``; benchmarks time both
        ways). It needs matrix products that keep a row's bits at every row count of a pass,
        checked here once (``row_invariance``: on CUDA the fused path's form is chosen, the
        plain path's products are checked as they run); where they do not, prefill runs
        without it, with a warning: the prefix cache then resumes anywhere, and a cached
        prompt's outputs may differ from an uncached one's where logits nearly tie. Graphs
        already captured keep the form they were captured with."""
        if on and not self._products_keep_rows():
            logger.warning("split-invariant prefill is not possible here (the matrix products "
                           "change a row's bits with the row count): prefilling without it "
                           "(prefix-cached prompts may give other outputs than uncached ones "
                           "where logits nearly tie)")
            on = False
        self.split_invariant = on
        self.wkv_step, self.wkv_chunk = _wkv_functions(self.device, self.wkv_impl, on)

    @property
    def graphed_prefill(self) -> bool:
        """Whether a single sequence's prefill pass replays a CUDA graph (a pass of several
        rows runs eagerly: on CUDA bound by the host's launch rate, tens of ms at 2.9B)."""
        return self._graphed_prefill is not None

    def pass_keeps_bits(self, rows: int) -> bool:
        """Whether a prefill pass of ``rows`` prompts gives each the bits a pass of its own gives
        it. Not on CUDA past ``#SMs / H`` rows: the Triton WKV then takes the token loop
        (``kernels.prefer_chunked``), which rounds otherwise than the chunked form a lone prompt
        takes (the prefix cache keeps no state of such a pass: a later lone request would start
        from bits an uncached run of it does not have)."""
        return rows <= 1 or not self.takes_token_loop(rows, 64)

    def takes_token_loop(self, rows: int, T: int) -> bool:
        """Whether a prefill pass of ``rows`` prompts padded to ``T`` tokens runs the Triton
        WKV's token loop (``kernels.prefer_chunked`` false), not its chunked form: never with
        the torch WKV, or with a WKV function swapped in for the kernels'."""
        chunk = getattr(self.wkv_chunk, "func", self.wkv_chunk)
        if chunk is wkv.wkv_chunk:  # (the torch WKV: no import of the kernels, which brought
            return False  # Triton in, ~0.4 s, in a CPU server's first request)
        from server.model import kernels

        return chunk is kernels.wkv_chunk and not kernels.prefer_chunked(
            rows, T, self.cfg.n_head, self.device, self.split_invariant)

    def _products_keep_rows(self) -> bool:
        """Whether this model's prefill products give a row the same bits at every row count,
        in the form chosen for them (``row_invariance``: the fused path's residual products on
        CUDA, every product of the plain forward; chosen once, then kept)."""
        fused = self._fused
        if fused is not None and self.device.type != "cuda":
            return True  # the fused path under Triton's CPU interpreter (tests)
        first = (self._slices if fused is None else fused.slices) is None
        if fused is not None:
            kept, chosen = fused.check_split_invariance(), fused.slices
        else:
            if first:
                self._slices = row_invariance.plain_slices(self) or {}
            kept, chosen = bool(self._slices), self._slices
        if first and kept:
            sliced = {name: n for name, n in chosen.items() if n > 1}
            logger.info(f"split-invariant prefill: products over slices of K {sliced or '-'} "
                        "(the others whole)")
        return kept

    def _check_fused(self) -> None:
        """Keep the fused kernels only if they compile and agree with the plain path."""
        try:
            err = check_fused(self)
        except Exception as e:  # e.g. a Triton version that rejects a kernel
            logger.warning(f"fused kernels failed ({e!r:.300}): using the plain path")
            self._fused = None
            return
        tol = 1e-4 if self.dtype == torch.float32 else 2e-2
        if not err < tol:
            logger.warning(f"fused kernels disagree with the plain path (rel err {err:.2e}): "
                           "using the plain path")
            self._fused = None
        else:
            logger.info(f"fused kernels on (rel err vs plain path {err:.1e})")

    def new_state(self, batch: int) -> State:
        return State.zeros(self.cfg, batch, self.device, self.dtype, self.state_dtype)

    def capture_prefill_graphs(self) -> list[int]:
        """Capture the single-sequence prefill graph of every bucket now (a server's warm-up)
        instead of in the first request of each length; returns the buckets (none without
        graphs). Runs on a scratch state."""
        gp = self._graphed_prefill
        if gp is None:
            return []
        scratch = self.new_state(1)
        for T in sorted({gp.bucket(n) for n in range(1, self.prefill_chunk + 1)}):
            self.prefill([[0] * T], scratch, logits=False)
        return sorted(gp.graphs)

    def clear_graphs(self) -> None:
        """Drop the captured decode graphs (they keep their state tensors' addresses)."""
        if self._graphed is not None:
            self._graphed.clear()

    # ---- public passes -----------------------------------------------------------------
    @torch.no_grad()
    def decode(self, tokens: Tensor, state: State, active: Tensor | None = None,
               borrow: bool = False) -> Tensor:
        """One token per row. tokens: [B] long; state rows B (updated in place).
        ``active`` [B] bool: rows where it is False keep their state (their logits are junk).
        Returns logits [B, V] float32. ``borrow``: they may be a graph's output buffer, valid
        (and not to be written) until the next decode call (saves a [B, V] copy a step)."""
        self._check(state, tokens.shape[0])
        tokens = tokens.to(self.device)
        active = None if active is None else active.to(self.device)
        if self._graphed is not None:
            return self._graphed(tokens, state, active, copy=not borrow)
        return self._decode_step(tokens, state, active)

    def _decode_step(self, tokens: Tensor, state: State, active: Tensor | None,
                     out: Tensor | None = None) -> Tensor:
        keep = None if active is None else active.view(-1, 1)  # [B, 1]
        x = self._forward(tokens.view(-1, 1), state, keep, None)  # [B, C]
        return self._logits(x, out)

    @torch.no_grad()
    def prefill(self, token_lists: list[list[int]], state: State,
                logits: bool = True, mid: int | list[int] = 0,
                mid_state: State | None = None) -> Tensor | None:
        """Row i of ``state`` <- sequence i, continuing from what the row holds (in place).
        Prompts may have different lengths (none empty). Returns the logits after each
        sequence's last token: [n, V] float32 (``logits=False``: None, the head is skipped).
        ``mid`` (one sequence: a position, or up to ``MID_POINTS`` of them, each a multiple of
        ``prefill_align`` inside it) with ``mid_state`` (a row per position): row k <- the
        state after the first ``mid[k]`` tokens, the bits ``prefill(tokens[:mid[k]])`` leaves
        (a split-invariant model; else within its rounding), from the same passes: a chat
        turn's boundaries inside its new message are kept without computing them again."""
        n = len(token_lists)
        self._check(state, n)
        lens = [len(t) for t in token_lists]
        if n == 0 or min(lens) == 0:
            raise ValueError("prefill needs at least one sequence and no empty sequence")
        mids = [mid] if isinstance(mid, int) else list(mid)
        if any(mids):
            self._check_mid(lens, mids, mid_state)
        else:
            mids = []
        order = sorted(range(n), key=lambda i: -lens[i])  # longest first
        x_last = torch.empty(n, self.cfg.n_embd, dtype=torch.float32, device=self.device)
        for off in range(0, lens[order[0]], self.prefill_chunk):
            for k, m in enumerate(mids):  # a pass boundary: the state the previous pass left
                if m == off:
                    mid_state.assign([k], state)
            rows = [i for i in order if lens[i] > off]
            at = [m - off if 0 < m - off < self.prefill_chunk else 0 for m in mids]
            widths = [self._pass_width(lens[i] - off) for i in rows]
            for lo, hi in plan_passes(widths, self.prefill_tokens):  # (few padded tokens)
                group = rows[lo:hi]
                if max(group) - min(group) == len(group) - 1:  # consecutive rows: in order,
                    group = sorted(group)  # their state as views (``_prefill_pass``)
                self._prefill_pass(token_lists, group, off, state, x_last, at, mid_state)
        return self._row_logits(x_last) if logits else None

    @torch.no_grad()
    def score(self, tokens: list[int], targets: list[int], state: State, top: int = 0,
              rows: int = 256) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """``tokens`` of one sequence through the model from ``state`` (one row, updated in place
        as a prefill of them leaves it, within its rounding), and the model's log probabilities
        of ``targets`` (what follows each of the first ``len(targets)`` tokens) with the ``top``
        most likely alternatives: ``sampler.token_logprobs``'s tensors. Passes of
        ``prefill_chunk`` tokens, from the prefill graphs where the model has them (an eager
        pass is bound by the host's launch rate); the head runs ``rows`` positions at a time
        ([rows, V] fp32 logits)."""
        self._check(state, 1)
        if not tokens or len(targets) > len(tokens):
            raise ValueError("score needs tokens and at most one target per token")
        parts, tgt = [], to_device(targets, self.device)
        for off in range(0, len(tokens), self.prefill_chunk):
            part = tokens[off:off + self.prefill_chunk]
            if self._graphed_prefill is not None:
                x = self._graphed_prefill(part, state, every=True)  # [n, C]
            else:
                x = self._forward(to_device([part], self.device), state, None, None,
                                  every=True)[0]
            for i in range(off, min(off + len(part), len(targets)), rows):
                end = min(i + rows, off + len(part), len(targets))
                parts.append(token_logprobs(self._logits(x[i - off:end - off]), tgt[i:end], top))
        if not parts:  # (a last pass of one token: nothing it scores)
            empty = torch.empty(0, device=self.device)
            if not top:
                return empty, None, None
            return empty, empty.view(0, top), torch.empty(0, top, dtype=torch.long,
                                                         device=self.device)
        chosen = torch.cat([p[0] for p in parts])
        if not top:
            return chosen, None, None
        return chosen, torch.cat([p[1] for p in parts]), torch.cat([p[2] for p in parts])

    def _pass_width(self, left: int) -> int:
        """Tokens per row of a pass whose longest row has ``left`` tokens to go: the chunk's,
        padded as ``_forward_padded`` pads (a pass of 1-token rows costs ``prefill_align``
        tokens a row; counted unpadded, a pass went 16-64x over ``prefill_tokens``)."""
        width = min(self.prefill_chunk, left)
        return width + (-width % self.prefill_align if self.split_invariant else 0)

    def _check_mid(self, lens: list[int], mids: list[int], mid_state: State | None) -> None:
        align = self.prefill_align  # (the WKV hands out states where its chunks end)
        if len(lens) != 1 or not 0 < len(mids) <= MID_POINTS or any(
                not 0 < m < lens[0] or m % align for m in mids):
            raise ValueError(f"prefill's mid must be 1-{MID_POINTS} multiples of {align} "
                             f"inside one sequence (got {mids} for lengths {lens})")
        if mid_state is None or mid_state.batch_size != len(mids) or \
                mid_state.device != self.device:
            raise ValueError("prefill's mid needs a mid_state with a row per position on the "
                             "model's device")

    # ---- internals ---------------------------------------------------------------------
    def _check(self, state: State, batch: int) -> None:
        if state.batch_size != batch:
            raise ValueError(f"state has {state.batch_size} rows, the batch has {batch}")
        if state.device != self.device:
            raise ValueError(f"state is on {state.device}, the model on {self.device}")

    def _prefill_pass(self, token_lists, rows: list[int], off: int, state: State,
                      x_last: Tensor, mid: list[int] = (), mid_state: State | None = None
                      ) -> None:
        """Tokens off..off+chunk of sequences ``rows`` into their state rows (``mid``: for
        each k with mid[k] > 0 the state after that many of them into row k of ``mid_state``;
        one sequence)."""
        chunk = self.prefill_chunk
        parts = [token_lists[i][off:off + chunk] for i in rows]
        sub = state.rows(rows)  # consecutive rows in order: views (always, for a caller that
        in_place = sub is not None  # orders its rows longest first, as the engine does)
        if not in_place:
            sub = state.select(rows)
        if not any(mid):
            mid, mid_state = (), None
        if len(rows) == 1 and self._graphed_prefill is not None:
            x = self._graphed_prefill(parts[0], sub, list(mid), mid_state)  # [1, C]
        else:
            x = self._forward_padded(parts, sub, mid, mid_state)  # [rows, C]
        if not in_place:
            state.assign(rows, sub)
        done = [j for j, i in enumerate(rows) if len(token_lists[i]) <= off + chunk]
        if done:
            # (one sequence, a request's: a copy between views, no index upload before the
            # head; else index tensors through pinned memory: a copy from pageable memory would
            # wait for the pass, and the host's work until the first pulse would not overlap it)
            x_last[rows_on([rows[j] for j in done], self.device)] = x[rows_on(done, self.device)]

    def _forward_padded(self, parts: list[list[int]], state: State, mid: list[int] = (),
                        mid_state: State | None = None) -> Tensor:
        """Sequences of unequal lengths (padded with identity steps) through the layers. A
        split-invariant model pads every pass to a multiple of ``prefill_align`` tokens, as its
        CUDA graphs' buckets do: a pass ending anywhere (a prompt's last tokens after a cached
        state) then has its products at a row count whose rows keep their bits
        (``row_invariance`` checks those) and its WKV in the chunked form (a 1-token pass took
        the decode step's arithmetic); session 23's QA found both changing a resumed prompt's
        bits on the CPU."""
        widths = [len(p) for p in parts]
        T = self._pass_width(max(widths))
        tok = torch.zeros(len(parts), T, dtype=torch.long)
        for j, p in enumerate(parts):
            tok[j, :len(p)] = torch.as_tensor(p, dtype=torch.long)
        w = to_device(widths, self.device)
        keep = None if min(widths) == T else torch.arange(T, device=self.device) < w[:, None]
        at = to_device(list(mid), self.device) if mid_state is not None else None
        return self._forward(to_device(tok, self.device), state, keep, w - 1, at, mid_state)

    def _forward(self, tokens: Tensor, state: State, keep: Tensor | None,
                 last: Tensor | None, mid: Tensor | None = None,
                 mid_state: State | None = None, every: bool = False) -> Tensor:
        """tokens: [B, T]; keep: [B, T] bool (None = all valid); last: [B] index of each row's
        last valid token (None = T - 1). Returns the residual at ``last``: [B, C] float32.
        ``mid`` ([K] long tensor on the device, one sequence: B = 1) and ``mid_state`` (K rows):
        for each k with mid[k] > 0 (a multiple of ``prefill_align`` below T) the state after
        the first mid[k] tokens goes to row k, the bits a pass ending there leaves. Both the
        fused and the plain forward read ``mid`` on the device (a graph's input). ``every``:
        the residual at every position, [B, T, C] (``score``)."""
        if mid is None or tokens.shape[1] == 1:
            mid_state = None
        if self._fused is not None:
            return self._fused.forward(tokens, state, keep, last, mid, mid_state, every)
        x = embed(self.emb, tokens)  # [B, T, C] residual stream, fp32
        v_first = None
        for i, lw in enumerate(self.layers):
            x, v_first = self._time_mix(lw, x, state, i, keep, last, v_first, mid, mid_state)
            x = self._channel_mix(lw, x, state, i, keep, last, mid, mid_state)
        if every:
            return x
        if last is None:
            return x[:, -1]
        return x[torch.arange(x.shape[0], device=x.device), last]

    def _shift(self, u: Tensor, prev: Tensor, keep, last, mid=None,
               mid_prev: Tensor | None = None) -> Tensor:
        """Token shift: returns d = previous - u [B, T, C] and stores the new ``prev`` in place
        (and row ``mid[k] - 1``'s into row k of ``mid_prev``: ``_forward``'s export)."""
        d = torch.cat([prev.unsqueeze(1), u[:, :-1]], 1) - u
        if mid_prev is not None:  # (on the device: no wait for it, a graph may capture it)
            rows = u[0].index_select(0, (mid - 1).clamp(min=0))  # [K, C] (one sequence)
            mid_prev.copy_(torch.where((mid > 0)[:, None], rows, mid_prev))
        if last is not None:
            prev.copy_(u[torch.arange(u.shape[0], device=u.device), last])
        elif keep is not None:  # decode with inactive rows
            prev.copy_(torch.where(keep[:, -1:], u[:, -1], prev))
        else:
            prev.copy_(u[:, -1])
        return d

    def _time_mix(self, lw: LayerWeights, x, state, i, keep, last, v_first, mid=None,
                  mid_state=None):
        B, T, C = x.shape
        H, N, dt = self.cfg.n_head, self.cfg.head_size, self.dtype
        u = F.layer_norm(x, (C,), lw.ln1_w, lw.ln1_b, LN_EPS).to(dt)
        d = self._shift(u, state.shift[i, 0], keep, last, mid,
                        None if mid_state is None else mid_state.shift[i, 0])
        xr, xw, xk, xv, xa, xg = (u + d * lw.mix.view(6, 1, 1, C)).unbind(0)
        mm = functools.partial(self._product, lw, T)
        r, k, v = mm("wr", xr), mm("wk", xk), mm("wv", xv)
        w = lw.w0 + mm("w2", torch.tanh(mm("w1", xw)))
        w = torch.exp(-DECAY_SCALE * torch.sigmoid(w.float()))  # [B, T, C] in (0, 1)
        a = torch.sigmoid((lw.a0 + mm("a2", mm("a1", xa))).float())
        g = mm("g2", torch.sigmoid(mm("g1", xg)))
        kappa = F.normalize(k.float().view(B, T, H, N) * lw.k_k, dim=-1)  # [B, T, H, N]
        k = k.float() * (1 + (a - 1) * lw.k_a.view(C))
        if v_first is None:
            v_first = v
        else:
            v = v + (v_first - v) * torch.sigmoid(lw.v0 + mm("v2", mm("v1", xv)))
        y = self._wkv(state.wkv[i], r, w, k, v, kappa, a.view(B, T, H, N), keep, mid,
                      None if mid_state is None else mid_state.wkv[i])
        # reshape: with one head the WKV output can be a non-viewable slice (C = 64, 2+ rows)
        y = F.group_norm(y.float().reshape(B * T, C), H, lw.lnx_w, lw.lnx_b, GN_EPS).view(B, T, C)
        bonus = (r.float() * k * lw.r_k).view(B, T, H, N).sum(-1, keepdim=True)  # [B, T, H, 1]
        y = y + (bonus * v.float().view(B, T, H, N)).view(B, T, C)
        return x + mm("wo", (y * g.float()).to(dt)).float(), v_first

    def _wkv(self, S: Tensor, r, w, k, v, kappa, a, keep, mid=None, S_mid=None) -> Tensor:
        """Mask non-advancing positions to identity steps, then run the recurrence on S [B,H,N,N]
        (``mid``, ``S_mid``: ``wkv_chunk``'s export)."""
        B, T, C = r.shape
        H, N = self.cfg.n_head, self.cfg.head_size
        if keep is not None:
            m = keep.view(B, T, 1)
            w = torch.where(m, w, 1.0)
            k, v = k * m, v * m
            kappa = kappa * m.view(B, T, 1, 1)
        r, w, k, v = (t.view(B, T, H, N) for t in (r, w, k, v))
        if T == 1:
            return self.wkv_step(S, *(t[:, 0] for t in (r, w, k, v, kappa, a))).view(B, 1, C)
        return self.wkv_chunk(S, r, w, k, v, kappa, a, mid=mid, S_mid=S_mid).reshape(B, T, C)

    def _channel_mix(self, lw: LayerWeights, x, state, i, keep, last, mid=None,
                     mid_state=None):
        C = x.shape[-1]
        u = F.layer_norm(x, (C,), lw.ln2_w, lw.ln2_b, LN_EPS).to(self.dtype)
        d = self._shift(u, state.shift[i, 1], keep, last, mid,
                        None if mid_state is None else mid_state.shift[i, 1])
        T = x.shape[1]
        h = torch.relu(self._product(lw, T, "ffn_key", u + d * lw.ffn_x_k)) ** 2  # [B, T, 4C]
        return x + self._product(lw, T, "ffn_value", h).float()

    def _product(self, lw: LayerWeights, T: int, name: str, x: Tensor) -> Tensor:
        """x times layer weight ``name`` (``row_invariance.product``): in a split-invariant
        prefill pass over the slices of K chosen for it, else as one product."""
        invariant = T > 1 and self.split_invariant and self._slices
        slices = self._slices.get(name, 1) if invariant else 1
        w, linear = getattr(lw, name), name in row_invariance.LINEAR
        if invariant and x.dim() == 3 and x.shape[0] > 1 and \
                x.shape[0] * T > (rows := row_invariance.checked_rows(self)):
            # a batched pass: products of whole sequences at most ``rows`` rows at a time, the
            # row counts checked (a BLAS on several threads rounded a 512-row product's rows
            # otherwise than a lone prompt's 256: session 32's QA)
            per = max(1, rows // T)
            return torch.cat([row_invariance.product(part, w, linear, slices)
                              for part in x.split(per)])
        return row_invariance.product(x, w, linear, slices)

    def _row_logits(self, x: Tensor) -> Tensor:
        """``_logits`` with each row's bits those it has alone (a prompt's first logits must not
        depend on the prompts fed beside it, which the prefix cache changes). The plain path's
        head product gave a row other bits at 1 row than at 2-16 on the 2-core CPU machine
        (up to 5.7e-6; a fuzzing helper, session 49): there each row is its own product. The
        fused path's head (the skinny-product kernel up to ``gemv_rows`` rows, cuBLAS above)
        kept a row's bits at 1-160 rows on the H100 (test_split_invariance_gpu.py, session 50)."""
        if self._fused is not None or x.shape[0] == 1:
            return self._logits(x)
        return torch.cat([self._logits(x[i:i + 1]) for i in range(x.shape[0])])

    def _logits(self, x: Tensor, out: Tensor | None = None) -> Tensor:
        """x: [B, C] fp32 residual -> logits [B, V] fp32 (into ``out`` when given)."""
        u = F.layer_norm(x, x.shape[-1:], *self.ln_out, LN_EPS).to(self.dtype)
        if self._fused is not None:
            return self._fused.head(u, self.head, out)
        return linear_logits(u, self.head, out)
