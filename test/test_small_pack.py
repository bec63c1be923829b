"""pack_small_tensors (server/model/small_pack.py): a CUDA model's small weights moved into one
buffer; the function itself is device-agnostic, so these tests run it on the CPU."""

from dataclasses import dataclass

import torch

from server.model.small_pack import SMALL_BYTES, pack_small_tensors


@dataclass
class Holder:
    a: torch.Tensor
    b: torch.Tensor
    big: torch.Tensor
    view: torch.Tensor | None
    name: str = "x"


def test_small_tensors_move_into_one_buffer_with_values_shapes_and_views_kept():
    g = torch.Generator().manual_seed(0)
    shared = torch.randn(3, 40, generator=g)
    big = torch.randn(SMALL_BYTES // 4 + 1, generator=g)  # a large block: left where it is
    first = Holder(torch.randn(8, 5, generator=g).t(),  # strided
                   torch.arange(7, dtype=torch.int32), big, shared[1:, 3:])
    second = Holder(shared, torch.randn(33, dtype=torch.float64, generator=g)[5:], big, None)
    want = {(i, n): (getattr(h, n).clone(), getattr(h, n).stride())
            for i, h in enumerate((first, second)) for n in ("a", "b", "view")
            if getattr(h, n) is not None}
    old_ptrs = {getattr(h, n).untyped_storage().data_ptr() for (i, n), h in
                ((k, (first, second)[k[0]]) for k in want)}
    offsets = {k: getattr((first, second)[k[0]], k[1]).storage_offset() for k in want}
    moved = pack_small_tensors([first, second], "cpu")
    assert moved == 40 * 4 + 7 * 4 + 3 * 40 * 4 + 33 * 8  # each storage once (shared: once)
    storages = set()
    for (i, n), (w, stride) in want.items():
        t = getattr((first, second)[i], n)
        assert torch.equal(t, w) and t.dtype == w.dtype and t.stride() == stride
        storages.add(t.untyped_storage().data_ptr())
    assert len(storages) == 1 and not storages & old_ptrs  # one new buffer
    for (i, n) in want:  # each old storage starts 512-byte aligned in the buffer, as the
        # allocator's blocks do: Triton specialises kernels on a pointer's alignment (an
        # unaligned pack passed every value check; session 72's mutation review)
        t = getattr((first, second)[i], n)
        assert (t.storage_offset() - offsets[i, n]) * t.element_size() % 512 == 0
    assert first.big is big and second.big is big
    assert first.view.data_ptr() == second.a[1:, 3:].data_ptr()  # still a view of `shared`
    second.a[2, 5] = 7.0
    assert first.view[1, 2] == 7.0


def test_nothing_small_nothing_moved():
    big = torch.zeros(SMALL_BYTES // 4 + 1)  # (1 MiB exactly is still a small block)
    h = Holder(big, big, big, None)
    assert pack_small_tensors([h], "cpu") == 0 and h.a is big
    edge = Holder(torch.zeros(SMALL_BYTES // 4), big, big, None)
    assert pack_small_tensors([edge], "cpu") == SMALL_BYTES
