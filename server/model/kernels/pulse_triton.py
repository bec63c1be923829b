"""A decode pulse's per-step bookkeeping in one launch each (CUDA): the scheduler engine's
`_step_begin` and `_step_end` (server/scheduler/engine.py, whose torch versions define them) are
about 6 and 15 small element-wise launches over the slots; at batch 1 the host's launch rate
bounds them, at batch 256 each still costs a launch gap on the GPU. Rows are independent; every
tensor is [cap] (``out``/``valid``: [cap, steps], column ``s`` written)."""

import triton
import triton.language as tl
from torch import Tensor

_BLOCK = 1024


# sizes and the step's column vary from call to call: no specialisation on their values (Triton
# compiles a variant per argument equal to 1 or divisible by 16 otherwise, i.e. new compiles
# in the first pulses of each ramp, each a stall of the scheduler thread)
@triton.jit(do_not_specialize=["n"])
def _begin_kernel(stop_ptr, nostop_ptr, done_ptr, reason_ptr, active_ptr, n, reason_stop,
                  HAS_NOSTOP: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    stop = tl.load(stop_ptr + o, mask=m, other=0) != 0
    if HAS_NOSTOP:
        stop = stop & (tl.load(nostop_ptr + o, mask=m, other=0) == 0)
    done = tl.load(done_ptr + o, mask=m, other=1) != 0
    reason = tl.load(reason_ptr + o, mask=m, other=0)
    tl.store(reason_ptr + o, tl.where(~done & stop, reason_stop, reason), mask=m)
    tl.store(active_ptr + o, (~done & ~stop).to(tl.int1), mask=m)


def step_begin(stop: Tensor, nostop: Tensor | None, done: Tensor, reason: Tensor,
               active: Tensor, reason_stop: int) -> None:
    n = stop.shape[0]
    _begin_kernel[(triton.cdiv(n, _BLOCK),)](stop, stop if nostop is None else nostop, done,
                                             reason, active, n, reason_stop,
                                             HAS_NOSTOP=nostop is not None, BLOCK=_BLOCK)


@triton.jit(do_not_specialize=["n", "s", "steps", "row_stride"])
def _end_kernel(tok_ptr, logits_ptr, row_stride, cur_ptr, active_ptr, ngen_ptr, maxnew_ptr,
                turn_ptr, done_ptr, reason_ptr, out_ptr, valid_ptr, n, s, steps, eos, user,
                reason_eos, reason_len, reason_nonfinite, turn_nl, nl, ended0, ended1, ended2,
                BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tok = tl.load(tok_ptr + o, mask=m, other=0)
    cur = tl.load(cur_ptr + o, mask=m, other=0)
    active = tl.load(active_ptr + o, mask=m, other=0) != 0
    # the model's logit of the drawn token (active rows): NaN or infinite fails the comparison
    x = tl.load(logits_ptr + o.to(tl.int64) * row_stride + tok, mask=m & active, other=0.0)
    broken = active & ~(tl.abs(x.to(tl.float32)) <= 3.4028234663852886e38)
    turn = tl.load(turn_ptr + o, mask=m, other=-1)  # -1: no new turn ends the row (engine.py)
    on = turn != -1
    is_eos = (tok == eos) | ((tok == user) & on & ((cur == turn_nl) | (cur == turn)))
    ok = active & ~is_eos & ~broken
    tl.store(out_ptr + o.to(tl.int64) * steps + s, tok, mask=m)
    tl.store(valid_ptr + o.to(tl.int64) * steps + s, ok.to(tl.int1), mask=m)
    n_gen = tl.load(ngen_ptr + o, mask=m, other=0) + ok.to(tl.int64)
    tl.store(ngen_ptr + o, n_gen, mask=m)
    ended = (cur == ended0) | (cur == ended1) | (cur == ended2)
    tl.store(turn_ptr + o, tl.where(ok & on, tl.where(ended, nl, turn_nl), turn), mask=m)
    tl.store(cur_ptr + o, tl.where(ok, tok, cur), mask=m)
    full = n_gen >= tl.load(maxnew_ptr + o, mask=m, other=0)
    reason = tl.load(reason_ptr + o, mask=m, other=0)
    reason = tl.where(active & is_eos, reason_eos, reason)
    reason = tl.where(broken, reason_nonfinite, reason)
    reason = tl.where(ok & full, reason_len, reason)
    tl.store(reason_ptr + o, reason, mask=m)
    done = (tl.load(done_ptr + o, mask=m, other=1) != 0) | ~active | is_eos | broken | full
    tl.store(done_ptr + o, done.to(tl.int1), mask=m)


def step_end(tok: Tensor, logits: Tensor, cur: Tensor, active: Tensor, n_gen: Tensor,
             max_new: Tensor, turn: Tensor, done: Tensor, reason: Tensor, out: Tensor,
             valid: Tensor, s: int, eos: int, user: int, reason_eos: int, reason_len: int,
             reason_nonfinite: int, turn_nl: int, nl: int, ended: tuple[int, int, int]) -> None:
    n, steps = out.shape
    assert out.is_contiguous() and valid.is_contiguous() and logits.stride(1) == 1
    _end_kernel[(triton.cdiv(n, _BLOCK),)](tok, logits, logits.stride(0), cur, active, n_gen,
                                           max_new, turn, done, reason, out, valid, n, s, steps,
                                           eos, user, reason_eos, reason_len, reason_nonfinite,
                                           turn_nl, nl, *ended, BLOCK=_BLOCK)
