"""FusedBlocks: the CUDA fast path of RWKV7's time mix and channel mix (same math as forward.py).

Per layer and pass: one `ln_mix` launch per block (LayerNorm + token shift + the six lerp mixes),
the r/k/v/o and FFN matrix products, the four LoRA first stages as one batched product and the
second stages as another (stacked at load to a common width, overlapping: `lora_stacks`), one
`pre_wkv` launch,
the WKV kernel, one `post_wkv` launch, and in-place residual adds: about 20 launches a layer
instead of about 75 (kernels: `kernels/fused_triton.py`). Decode steps fold more: pre_wkv, the
WKV step and post_wkv are one kernel (`kernels/decode_triton.py`). Above 4 rows the products
are cuBLAS's, followed by one in-place activation launch (relu² of the FFN key; tanh/sigmoid of
two LoRA first stages); there the LoRA stages run on a second stream beside the r/k/v product
(forked and joined around it, so CUDA graphs capture the two branches).

The stacked LoRA weights replace the per-layer ones: each `LayerWeights.w1` (etc.) becomes a view
into the stack, so the plain path still works (and memory is not doubled).
"""

from __future__ import annotations

import importlib
import threading
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from server.model.embedding import embed
from server.model.layer_weights import LayerWeights
from server.model.reference import GN_EPS, LN_EPS

LORA_ORDER = ("v", "w", "a", "g")  # mixed inputs 2..5 of ln_mix are xv, xw, xa, xg
# half-precision products of at most this many rows: gemv_triton. Measured on the H200 (decode
# --preset 2.9b --state-dtype fp16 --gemv-rows 1 against the default 16, cuBLAS with the LoRA
# side stream): cuBLAS 6-7.5 % faster a step at 8, 12 and 16 rows, the kernel 2-5 % at 2 and 4
# (the 2.9B shape only; other shapes were not timed at these rows)
GEMV_MAX_ROWS = 4
SLICED_BMM_MAX_ROWS = 256  # _add_sliced: the slices as one batched product (measured at 160)


def fused_default(device: torch.device) -> bool:
    """On by default on CUDA when Triton imports (``RWKV_FUSED=false`` turns it off)."""
    if device.type != "cuda":
        return False
    from server.model import kernels

    return kernels.HAS_TRITON


def kernel_module(name: str, device: torch.device):
    """The Triton kernel module ``server.model.kernels.<name>`` where those kernels run
    (``fused_default``), else None: the caller's torch path (Triton is never imported on CPU)."""
    if not fused_default(torch.device(device)):
        return None
    return importlib.import_module(f"server.model.kernels.{name}")


@dataclass
class _Stacked:
    lora1: Tensor  # [4, D, C] run dtype (v, w, a, g first stages W^T; ``lora_stacks``)
    lora2: Tensor  # [4, C, D] (second stages W^T)
    lim1: Tensor  # [4, 2] int32: (N, K) limits of each first stage for gemv (D_i, C)
    lim2: Tensor  # [4, 2] int32: (C, D_i)
    rkv: Tensor  # [3, C, C] the r, k, v products (lw.wr/wk/wv are views of it)
    mix_att: Tensor  # [6, C] in ln_mix order r, k, v, w, a, g
    mix_ffn: Tensor  # [1, C]


def lora_stacks(dims: list[int], C: int, dtype, device) -> tuple[Tensor, Tensor]:
    """Zeroed stacks for the four LoRA stages of widths ``dims`` (v, w, a, g): the first stages
    [4, D, C] and the second [4, C, D] (each matrix transposed: rows contiguous along the
    product's reduction), D the widest rounded up to 16. Group i starts ``s`` rows (first) or
    columns (second) after group i-1, ``s`` the widest of the first three: a group's rows or
    columns past its width are the next group's, so the stacks hold 3s + D rows (columns)
    instead of 4D (2.9B's published widths 64, 96, 96 and 320: 608 instead of 1,280).
    A product over a group's padding reads the next group's weights: ``gemv`` stops at each
    group's width (its limits); the batched products' first-stage outputs past a group's width
    are zeroed (``lora_act_``) before the second stage reads them."""
    D = -(-max(dims) // 16) * 16
    s = -(-max(dims[:3]) // 16) * 16
    first = torch.zeros(3 * s + D, C, dtype=dtype, device=device)
    second = torch.zeros(C, 3 * s + D, dtype=dtype, device=device)
    return (first.as_strided((4, D, C), (s * C, C, 1)),
            second.as_strided((4, C, D), (s, 3 * s + D, 1)))


def _stack_layer(lw: LayerWeights) -> _Stacked:
    """Stack (and re-point ``lw``'s fields at) the r/k/v weights and the LoRA weights of one
    layer (``lora_stacks``), so one skinny-product kernel serves them all."""
    firsts = {"v": lw.v1, "w": lw.w1, "a": lw.a1, "g": lw.g1}
    seconds = {"v": lw.v2, "w": lw.w2, "a": lw.a2, "g": lw.g2}
    C = lw.w1.shape[0]
    # layer 0 has no value LoRA: width 0 (its products read the next group's rows, masked)
    dims = [0 if firsts[n] is None else firsts[n].shape[1] for n in LORA_ORDER]
    lora1, lora2 = lora_stacks(dims, C, lw.w1.dtype, lw.w1.device)
    for i, name in enumerate(LORA_ORDER):
        first, second, d = firsts[name], seconds[name], dims[i]
        if first is None:
            continue
        lora1[i, :d] = first.t()
        lora2[i, :, :d] = second.t()
        setattr(lw, f"{name}1", lora1[i, :d].t())
        setattr(lw, f"{name}2", lora2[i, :, :d].t())
    lim1 = torch.tensor([[d, C] for d in dims], dtype=torch.int32, device=lw.w1.device)
    lim2 = torch.tensor([[C, d] for d in dims], dtype=torch.int32, device=lw.w1.device)
    rkv = torch.stack([lw.wr, lw.wk, lw.wv])
    lw.wr, lw.wk, lw.wv = rkv.unbind(0)
    r, w, k, v, a, g = lw.mix.unbind(0)  # LayerWeights order: r, w, k, v, a, g
    return _Stacked(lora1, lora2, lim1, lim2, rkv, torch.stack([r, k, v, w, a, g]),
                    lw.ffn_x_k.view(1, -1))


def _f32_products(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether cuBLAS gives fp32 results of half-precision products here (``out_dtype``, CUDA
    only), residual add included: checked once on a small case, in place as the forward does."""
    if device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16):
        return False
    try:
        g = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(32, 64, device=device, generator=g)
        a = torch.randn(32, 128, device=device, generator=g).to(dtype)
        w = torch.randn(64, 128, device=device, generator=g).to(dtype)
        prod = a.float() @ w.float().t()
        want = x + prod
        torch.addmm(x, a, w.t(), out_dtype=torch.float32, out=x)
        parts = torch.bmm(a.view(32, 2, 64).transpose(0, 1), w.view(64, 2, 64).permute(1, 2, 0),
                          out_dtype=torch.float32)  # _add_sliced's per-slice products
        return bool(torch.allclose(x, want, rtol=1e-2, atol=1e-2)
                    and torch.allclose(parts.sum(0), prod, rtol=1e-2, atol=1e-2))
    except (RuntimeError, TypeError):  # an older torch: no out_dtype
        return False


def linear_logits(u: Tensor, weight: Tensor, out: Tensor | None = None) -> Tensor:
    """fp32 logits u @ weight^T by the plain product (into ``out``, [B, V] fp32, when given):
    fp32 weights write it there directly, others through a copy."""
    if out is not None and u.dtype == torch.float32:  # (F.linear's product, no copy)
        return torch.mm(u, weight.t(), out=out)
    logits = F.linear(u, weight)
    return logits.float() if out is None else out.copy_(logits)


class FusedBlocks:
    """Time mix and channel mix of every layer through the fused kernels. ``wkv_step`` and
    ``wkv_chunk`` are the model's WKV functions (read at call time: they stay swappable)."""

    def __init__(self, model):
        from server.model.kernels import decode_triton, fused_triton, gemv_triton

        self.k, self.g = fused_triton, gemv_triton
        # decode's time mix in one or two kernels, unless the model was asked for the torch WKV
        self.decode = None if model.wkv_impl == "torch" else decode_triton
        self.model = weakref.proxy(model)  # no reference cycle: the model owns this object
        self.stacks = [_stack_layer(lw) for lw in model.layers]
        # products of at most this many rows go through the skinny-product kernel (gemv_triton)
        self.gemv_rows = GEMV_MAX_ROWS if model.dtype in (torch.float16, torch.bfloat16) else 0
        # partials of the products split over K (LoRA first stages, output, FFN value): G x N
        # is at most 4 x max(C, D), plus a row block of padding per group
        D = max(st.lora1.shape[1] for st in self.stacks)
        self.scratch = (gemv_triton.GemvScratch(model.device, 4 * max(model.cfg.n_embd, D) + 256)
                        if self.gemv_rows else None)
        self.f32_out = _f32_products(model.device, model.dtype)
        # cuBLAS passes run the LoRA stages on a second stream beside the r/k/v product
        # (measured on the H200: decode 7.5 % faster at 32 rows, 2.5 % at 256, the same at 1,024
        # and in prefill); False: one stream (``decode --lora-stream 0``). Read at call time:
        # graphs already captured keep the form they were captured with.
        self.lora_stream = model.device.type == "cuda"  # (the interpreter runs this on CPU)
        # a batched prefill's WKV token loop with pre_wkv and post_wkv in one kernel (read at
        # call time; False: three launches, fp32 intermediates in memory: benchmarks, tests)
        self.seq_one_kernel = True
        self._sides = threading.local()  # a side stream per thread: one thread's graph capture
        # never takes in another thread's work
        # slices of K of the residual products in a split-invariant prefill, by product
        # (``check_split_invariance``; None: not chosen yet, {}: none keeps the bits here)
        self.slices: dict[str, int] | None = None

    def use_gemv_up_to(self, rows: int) -> None:
        """Run the products of at most ``rows`` rows (<= ``gemv_triton.MAX_ROWS``) through the
        skinny-product kernel instead of cuBLAS (its scratch made for them): the switch of
        ``python -m server.bench prefill --gemv-rows`` to time a short prompt's pass both ways.
        The default stays ``GEMV_MAX_ROWS``, the measured one. Graphs already captured keep
        the kernels they were captured with."""
        from server.model.kernels.gemv_triton import MAX_ROWS, GemvScratch

        if not self.gemv_rows or not 1 <= rows <= MAX_ROWS:
            raise ValueError(f"gemv takes 1 to {MAX_ROWS} rows of half-precision weights")
        self.gemv_rows = rows
        self.scratch = GemvScratch(self.model.device, self.scratch.rows, rows)

    @staticmethod
    def write_index(B: int, T: int, keep: Tensor | None, last: Tensor | None,
                    device) -> Tensor:
        """[B] int32: the token whose LayerNorm output becomes the shift state (-1: none)."""
        if last is not None:
            return last.to(torch.int32)
        if keep is not None:  # decode with inactive rows
            return torch.where(keep[:, -1], T - 1, -1).to(torch.int32)
        return torch.full((B,), T - 1, dtype=torch.int32, device=device)

    def _mix(self, x: Tensor, ln_w, ln_b, prev: Tensor, write: Tensor, mix: Tensor,
             T: int, mid=None, mid_prev: Tensor | None = None) -> Tensor:
        """ln_mix with the shift state ``prev`` updated in place (a split-invariant model's
        prefill rows one program each: a split row reduces its statistics in another order);
        ``mid``, ``mid_prev``: ``forward``'s export."""
        return self.k.ln_mix(x, ln_w, ln_b, prev, prev, write, mix, T, LN_EPS, self.model.dtype,
                             split=T == 1 or not self.model.split_invariant, mid=mid,
                             mid_prev=mid_prev)

    def time_mix(self, i: int, x: Tensor, state, keep8: Tensor | None, write: Tensor, T: int,
                 v_first: Tensor | None, mid=None, mid_state=None) -> Tensor:
        """x: [R, C] fp32 residual (updated in place); keep8: [R] int8 or None.
        Returns v_first (the first layer's value, [R, C])."""
        m, lw, st = self.model, self.model.layers[i], self.stacks[i]
        R, C = x.shape
        B = R // T
        H, N = m.cfg.n_head, m.cfg.head_size
        xs = self._mix(x, lw.ln1_w, lw.ln1_b, state.shift[i, 0], write, st.mix_att, T, mid,
                       None if mid_state is None else mid_state.shift[i, 0])
        if R <= self.gemv_rows:
            # r/k/v and the LoRA first stages read the same mixes: one launch (the short LoRA
            # programs fill in beside the long r/k/v ones)
            rkv, h = self.g.gemv_pair(  # h: [4, R, D]
                dict(x=xs[:3], w=st.rkv),
                dict(x=xs[2:6], w=st.lora1, epi=self.g.EPI_LORA, limits=st.lim1), self.scratch)
            r, k, v = rkv.unbind(0)
            lora = self.g.gemv(h, st.lora2, limits=st.lim2, scratch=self.scratch)  # [4, R, C]
        elif self.lora_stream and (side := self._side_stream()) is not None:
            r, k, v, lora = self._rkv_lora_overlapped(xs, st, side)
        else:
            r, k, v = torch.bmm(xs[:3], st.rkv.transpose(1, 2)).unbind(0)
            lora = self._lora(xs, st)
        # A pass's memory peak is in the WKV below: the mixes are not needed past here (6 rows
        # of fp16 a token, ~30 KB at 2.9B), and the first layer's value outlives its layer as
        # v_first, a view that would keep r and k alive with it through every layer (another
        # ~10 KB a token): copied alone in a pass (decode's rows are few; its graphs keep the
        # view)
        del xs
        if v_first is None and T > 1:
            v = v.clone()
        S = state.wkv[i]
        # the state, then pre_wkv's arguments (every time-mix form below takes these)
        pre = (S, r, k, v, lora, v_first, keep8, lw.w0, lw.a0, lw.v0, lw.k_k.view(-1), lw.k_a,
               lw.r_k)
        if T == 1 and self.decode is not None:
            # pre_wkv + WKV step + post_wkv in one launch
            out = self.decode.time_mix_decode(*pre, lw.lnx_w, lw.lnx_b, self.k.DECAY_SCALE,
                                              GN_EPS)
        elif mid is None and self._one_kernel_loop(B, T):  # the same over T tokens
            out = self.decode.time_mix_seq(*pre, lw.lnx_w, lw.lnx_b, self.k.DECAY_SCALE,
                                           GN_EPS, T)
        else:
            w, kk, vv, kap, a, bonus = self.k.pre_wkv(*pre[1:], H)
            if T == 1:
                y = m.wkv_step(S, *(t.view(B, H, N) for t in (r, w, kk, vv, kap, a)))
            else:
                y = m.wkv_chunk(S, *(t.view(B, T, H, N) for t in (r, w, kk, vv, kap, a)),
                                mid=mid, S_mid=None if mid_state is None else mid_state.wkv[i])
            out = self.k.post_wkv(y.contiguous().view(R, C), vv, lora[3], bonus, lw.lnx_w,
                                  lw.lnx_b, GN_EPS, m.dtype)
        self._add_residual(x, out, lw.wo, "output", T)
        return v if v_first is None else v_first

    def _one_kernel_loop(self, B: int, T: int) -> bool:
        """Whether a pass of B sequences of T > 1 tokens takes the WKV's token loop with
        pre_wkv and post_wkv in its kernel (``decode_triton.time_mix_seq``): where the model's
        WKV would take its Triton token loop (``RWKV7.takes_token_loop``) and the pass has
        enough sequences (``seq_programs_fill``: four items of a sequence and head an SM).
        ``seq_one_kernel`` False: the three launches (benchmarks, tests)."""
        if T < 2 or self.decode is None or not self.seq_one_kernel:
            return False
        m = self.model
        return (self.decode.seq_programs_fill(B, m.cfg.n_head, m.device)
                and m.takes_token_loop(B, T))

    def _lora(self, xs: Tensor, st, h: Tensor | None = None,
              lora: Tensor | None = None) -> Tensor:
        """The four LoRA stages of the mixes ``xs[2:6]``: [4, R, C] (v, w, a LoRA, gate g);
        into ``h`` / ``lora`` when given."""
        h = self.k.lora_act_(torch.bmm(xs[2:6], st.lora1.transpose(1, 2), out=h),  # [4, R, D]
                             st.lim1)
        return torch.bmm(h, st.lora2.transpose(1, 2), out=lora)

    def _side_stream(self):
        """This thread's side stream, made at its first eager pass (every capture here follows
        an eager warm-up; one that did not would run the one-stream form)."""
        side = getattr(self._sides, "stream", None)
        if side is None and not torch.cuda.is_current_stream_capturing():
            side = self._sides.stream = torch.cuda.Stream(self.model.device)
        return side

    def _rkv_lora_overlapped(self, xs: Tensor, st, side):
        """r, k, v and the LoRA stages, the LoRA chain on the side stream while the r/k/v
        product runs. Its tensors are made on this stream before the fork and freed after the
        join, so the allocator never hands their memory to another stream's work early."""
        main = torch.cuda.current_stream()
        R, D, C = xs.shape[1], st.lora1.shape[1], st.lora2.shape[1]
        h = torch.empty(4, R, D, dtype=xs.dtype, device=xs.device)
        lora = torch.empty(4, R, C, dtype=xs.dtype, device=xs.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            self._lora(xs, st, h, lora)
        r, k, v = torch.bmm(xs[:3], st.rkv.transpose(1, 2)).unbind(0)
        main.wait_stream(side)
        return r, k, v, lora

    def _add_product(self, x: Tensor, inp: Tensor, weight: Tensor) -> None:
        """x (fp32 residual) += inp @ weight^T (in the product's epilogue where possible)."""
        if x.shape[0] <= self.gemv_rows:
            self.g.gemv(inp, weight, out=x, epi=self.g.EPI_ADD, scratch=self.scratch)
        elif self.f32_out:
            torch.addmm(x, inp, weight.t(), out_dtype=torch.float32, out=x)
        else:
            x.add_(F.linear(inp, weight))

    def _add_sliced(self, x: Tensor, inp: Tensor, weight: Tensor, slices: int) -> None:
        """``_add_product`` over ``slices`` slices of K, added in order (1: one product): a
        split-invariant prefill's residual products, in the form ``row_invariance`` chose,
        whose rows keep their bits at every row count (cuBLAS otherwise splits a long K over
        the GPU for few rows). Up to ``SLICED_BMM_MAX_ROWS`` rows the slices' products are one
        batched product, then added in order in one launch (``add_parts_``): the same bits as
        a product-and-add per slice (measured at 16 to 1,024 rows, 2.9B's FFN value), 27
        against 36 µs at 160 rows for the products, but 106 against 90 at 1,024."""
        N, K = weight.shape
        if slices < 2 or not self.f32_out or x.shape[0] <= self.gemv_rows:
            return self._add_product(x, inp, weight)
        n = K // slices
        if x.shape[0] <= SLICED_BMM_MAX_ROWS:
            parts = torch.bmm(inp.view(-1, slices, n).transpose(0, 1),
                              weight.view(N, slices, n).permute(1, 2, 0), out_dtype=torch.float32)
            self.k.add_parts_(x, parts)
            return
        for s in range(0, K, n):
            torch.addmm(x, inp[:, s:s + n], weight[:, s:s + n].t(), out_dtype=torch.float32,
                        out=x)

    def _add_residual(self, x: Tensor, inp: Tensor, weight: Tensor, name: str, T: int) -> None:
        """A product added into the residual: in a split-invariant prefill pass, over the slices
        of K chosen for it (``slices``), else as one product."""
        if T > 1 and self.model.split_invariant:  # (slices not chosen: the CPU's interpreter)
            self._add_sliced(x, inp, weight, self.slices.get(name, 1) if self.slices else 1)
        else:
            self._add_product(x, inp, weight)

    def check_split_invariance(self) -> bool:
        """Choose the residual products' slices of K for a split-invariant prefill on this GPU
        (``row_invariance.choose_slices``; once). False when its products cannot keep a row's
        bits at every row count here (no fp32-output products: an older torch; or no form
        found): the model then prefills without split invariance."""
        if self.slices is None:
            from server.model.row_invariance import choose_slices

            self.slices = (choose_slices(self) if self.f32_out else None) or {}
        return bool(self.slices)

    def head(self, u: Tensor, weight: Tensor, out: Tensor | None = None) -> Tensor:
        """fp32 logits u @ weight^T, straight from the product where it can give fp32; into
        ``out`` ([B, V] fp32) when given."""
        if u.shape[0] <= self.gemv_rows:
            if out is None:
                out = torch.empty(u.shape[0], weight.shape[0], dtype=torch.float32,
                                  device=u.device)
            return self.g.gemv(u, weight, out=out, scratch=self.scratch)
        if self.f32_out:
            return torch.mm(u, weight.t(), out_dtype=torch.float32, out=out)
        return linear_logits(u, weight, out)

    def channel_mix(self, i: int, x: Tensor, state, write: Tensor, T: int, mid=None,
                    mid_state=None) -> None:
        lw, st = self.model.layers[i], self.stacks[i]
        xk = self._mix(x, lw.ln2_w, lw.ln2_b, state.shift[i, 1], write, st.mix_ffn, T, mid,
                       None if mid_state is None else mid_state.shift[i, 1])[0]
        if x.shape[0] <= self.gemv_rows:
            h = self.g.gemv(xk, lw.ffn_key, epi=self.g.EPI_RELU2,
                            scratch=self.scratch)  # [R, 4C]
        else:
            h = self.k.relu_sq_(F.linear(xk, lw.ffn_key))
        del xk  # (not held through the value product and its fp32 parts)
        self._add_residual(x, h, lw.ffn_value, "ffn_value", T)

    def forward(self, tokens: Tensor, state, keep: Tensor | None, last: Tensor | None,
                mid: Tensor | None = None, mid_state=None, every: bool = False) -> Tensor:
        """Same contract as RWKV7._forward: tokens [B, T]; returns the residual at ``last``
        (``every``: at every position, [B, T, C])."""
        B, T = tokens.shape
        x = embed(self.model.emb, tokens.reshape(-1))  # [R, C] fp32 residual
        write = self.write_index(B, T, keep, last, x.device)
        keep8 = None if keep is None else keep.reshape(-1).to(torch.int8)
        v_first = None
        if mid is None or T == 1:
            mid_state = None
        for i in range(len(self.model.layers)):
            v_first = self.time_mix(i, x, state, keep8, write, T, v_first, mid, mid_state)
            self.channel_mix(i, x, state, write, T, mid, mid_state)
        x = x.view(B, T, -1)
        if every:
            return x
        if last is None:
            return x[:, -1]
        return x[torch.arange(B, device=x.device), last]


def check_fused(model, layers: int = 2) -> float:
    """Compile the fused kernels and compare them with the plain path on scratch states, through
    the first ``layers`` layers (deeper, the two paths' different fp16 roundings grow apart on
    random weights): a 2-row padded prompt, then a decode step with one row inactive. Returns
    max|fused - plain| / max|plain| of the residual stream (raises if a kernel fails)."""
    dev, V = model.device, model.cfg.vocab_size
    g = torch.Generator(device=dev).manual_seed(0)
    toks = torch.randint(0, V, (2, 5), generator=g, device=dev)
    keep = torch.ones(2, 5, dtype=torch.bool, device=dev)
    keep[1, 3:] = False
    last = torch.tensor([4, 2], device=dev)
    active = torch.tensor([[True], [False]], device=dev)
    fused, all_layers, outs = model._fused, model.layers, []
    model.layers = all_layers[:layers]
    try:
        for path in (None, fused):
            model._fused = path
            st = model.new_state(2)
            x = model._forward(toks, st, keep, last)  # [2, C]
            y = model._forward(toks[:, :1], st, active, None)[:1]  # the active row
            outs.append(torch.cat([x, y]))
    finally:
        model._fused, model.layers = fused, all_layers
    plain, got = outs
    return ((got - plain).abs().max() / plain.abs().max()).item()
