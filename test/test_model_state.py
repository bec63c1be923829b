"""State: zeros, select/assign/clone/to/zero_ round trips (docs/architecture.md contract)."""

import pytest
import torch

from server.model.random import make_config
from server.model.state import State

CFG = make_config(3, 128, 256)  # L3, C128 (H2), V256


def filled(batch: int) -> State:
    """A state whose every element is distinct (row r of wkv holds values offset by r)."""
    s = State.zeros(CFG, batch, "cpu", torch.float16, torch.float32)
    s.shift.copy_(torch.arange(s.shift.numel()).view_as(s.shift) % 1000)
    s.wkv.copy_(torch.randn(s.wkv.shape, generator=torch.Generator().manual_seed(0)))
    return s


def test_zeros_shapes_and_dtypes():
    s = State.zeros(CFG, 5, "cpu", torch.bfloat16, torch.float16)
    assert s.shift.shape == (3, 2, 5, 128) and s.shift.dtype == torch.bfloat16
    assert s.wkv.shape == (3, 5, 2, 64, 64) and s.wkv.dtype == torch.float16
    assert s.batch_size == 5 and not s.shift.any() and not s.wkv.any()


def test_select_copies_rows_in_order():
    s = filled(4)
    sub = s.select([3, 1])
    assert sub.batch_size == 2
    assert torch.equal(sub.shift[:, :, 0], s.shift[:, :, 3])
    assert torch.equal(sub.wkv[:, 1], s.wkv[:, 1])
    sub.wkv.zero_()  # a copy: the source is untouched
    assert s.wkv[:, 3].abs().sum() > 0
    assert torch.equal(s.select(torch.tensor([2])).wkv[:, 0], s.wkv[:, 2])


def test_assign_round_trip_and_cast():
    s, t = filled(4), State.zeros(CFG, 6, "cpu", torch.float32, torch.float64)
    t.assign([5, 0], s.select([1, 2]))
    assert t.shift.dtype == torch.float32 and t.wkv.dtype == torch.float64
    assert torch.equal(t.shift[:, :, 5], s.shift[:, :, 1].float())
    assert torch.equal(t.wkv[:, 0], s.wkv[:, 2].double())
    assert not t.wkv[:, 1:5].any()  # other rows untouched
    back = State.zeros(CFG, 4, "cpu", torch.float16, torch.float32)
    back.assign([1, 2], t.select([5, 0]))
    assert torch.equal(back.select([1, 2]).shift, s.select([1, 2]).shift)
    assert torch.equal(back.select([1, 2]).wkv, s.select([1, 2]).wkv)


def test_assign_uses_leading_rows_of_other():
    s, big = State.zeros(CFG, 2, "cpu", torch.float16, torch.float32), filled(4)
    s.assign([1], big)  # only row 0 of `big` is used
    assert torch.equal(s.wkv[:, 1], big.wkv[:, 0]) and not s.wkv[:, 0].any()


def test_clone_to_and_zero():
    s = filled(3)
    c = s.clone()
    c.shift.add_(1)
    assert not torch.equal(c.shift, s.shift)
    assert s.to() is s
    h = s.to(dtype=torch.float32, state_dtype=torch.float16)
    assert h.shift.dtype == torch.float32 and h.wkv.dtype == torch.float16
    assert torch.equal(h.shift, s.shift.float())
    s.zero_([1])
    assert not s.wkv[:, 1].any() and not s.shift[:, :, 1].any()
    assert s.wkv[:, 0].any() and s.wkv[:, 2].any()
    s.zero_()
    assert not s.wkv.any() and not s.shift.any()


def test_consecutive_rows_take_slices_with_the_same_results():
    """Rows listed in order without a gap (one slot, the usual case) are taken as a slice (no
    index tensor); select, assign (with a cast) and zero_ give what the indexed path gives,
    and select still copies."""
    from server.model.state import rows_of

    assert rows_of([3]) == slice(3, 4) and rows_of([2, 3, 4]) == slice(2, 5)
    assert rows_of([3, 1]) == [3, 1] and rows_of([1, 3]) == [1, 3] and rows_of([]) == []
    idx = torch.tensor([1, 2])
    assert rows_of(idx) is idx
    s = filled(4)
    for rows in ([1], [1, 2], [0, 1, 2, 3]):
        by_slice, by_index = s.select(rows), s.select(torch.tensor(rows))
        assert torch.equal(by_slice.shift, by_index.shift)
        assert torch.equal(by_slice.wkv, by_index.wkv)
        by_slice.wkv.zero_()
        assert s.wkv[:, rows[0]].abs().sum() > 0  # a copy
    src = filled(3)
    a, b = State.zeros(CFG, 5, "cpu", torch.float32, torch.float64), \
        State.zeros(CFG, 5, "cpu", torch.float32, torch.float64)
    a.assign([2, 3], src)  # rows 0..1 of src, cast
    b.assign(torch.tensor([2, 3]), src)
    assert torch.equal(a.shift, b.shift) and torch.equal(a.wkv, b.wkv)
    assert a.wkv.dtype == torch.float64 and torch.equal(a.wkv[:, 3], src.wkv[:, 1].double())
    a.zero_([3])
    b.zero_(torch.tensor([3]))
    assert torch.equal(a.wkv, b.wkv) and not a.wkv[:, 3].any() and a.wkv[:, 2].any()


def test_rows_a_slice_cannot_take_behave_as_indexed():
    """Rows a slice would get wrong take the indexed path, as before slices: rows past the
    batch or negative raise in select/assign (zero_ counts a negative row from the end), and
    ``other`` with fewer rows than ``idx`` raises (a slice took no row, or fewer, or broadcast
    ``other``'s one row, silently)."""
    s = filled(4)
    for rows in ([4], [3, 4], [-1], [-1, 0]):
        with pytest.raises((IndexError, RuntimeError)):
            s.select(rows)
    with pytest.raises((IndexError, RuntimeError)):
        s.assign([4], filled(1))
    with pytest.raises((IndexError, RuntimeError)):
        s.assign([1, 2], filled(1))  # one row of other for two
    z = filled(4)
    z.zero_([-1])
    assert not z.wkv[:, 3].any() and z.wkv[:, 2].any()


def test_rows_on_is_a_slice_for_a_run_and_else_the_rows_in_their_order():
    """``rows_on`` (the engine's fills, the prefill pass's hand-off to the head): a slice for
    consecutive rows in order, else an index tensor of the rows as given (order kept: the pass
    copies row j of its output to the j-th row listed); ``to_device`` keeps the dtype asked."""
    from server.model.state import rows_on, to_device

    assert rows_on([2, 3, 4], "cpu") == slice(2, 5)
    for idx in ([3, 2], [4, 1, 2], [-1, 0]):
        got = rows_on(idx, "cpu")
        assert isinstance(got, torch.Tensor) and got.dtype == torch.long and got.tolist() == idx
    assert to_device([1, 2], "cpu", torch.int32).dtype == torch.int32
    assert to_device([0.5], "cpu", torch.float32).tolist() == [0.5]
