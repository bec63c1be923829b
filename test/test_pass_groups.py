"""``pass_groups.plan_passes``: a batched prefill's rows grouped into passes by width (few padded
tokens, each pass within its cap), and a model's prefill taking those groups."""

import random

import pytest
import torch

from model_cases import make_case, one_thread, rand_tokens, rel_err
from server.model.forward import RWKV7
from server.model.pass_groups import PASS_FIXED_TOKENS, plan_passes


def cost(widths, groups, fixed=PASS_FIXED_TOKENS):
    """Padded tokens (each pass at its first row's width) plus the fixed cost a pass."""
    return sum(fixed + (hi - lo) * widths[lo] for lo, hi in groups)


def every_split(widths, cap):
    """Every split of the rows into consecutive passes within the cap (small inputs)."""
    n = len(widths)
    for mask in range(1 << max(n - 1, 0)):
        cuts = [0] + [i + 1 for i in range(n - 1) if mask >> i & 1] + [n]
        groups = list(zip(cuts, cuts[1:]))
        if all(hi - lo == 1 or (hi - lo) * widths[lo] <= cap for lo, hi in groups):
            yield groups


def cap_only(widths, cap):
    """The grouping before session 69: as many rows a pass as the longest row's width allows."""
    per = max(1, cap // widths[0])
    return [(a, min(a + per, len(widths))) for a in range(0, len(widths), per)]


def check(widths, groups, cap):
    assert [lo for lo, _ in groups] == [0] + [hi for _, hi in groups[:-1]]  # in order, no gap
    assert groups[-1][1] == len(widths)
    for lo, hi in groups:
        assert hi > lo and ((hi - lo) * widths[lo] <= cap or hi - lo == 1)


def test_a_long_row_goes_apart_from_short_ones():
    """The served load's worst pass (session 69): one 704-token row beside 15 of 240 went as
    one pass of 16 x 704; apart, 704 + 15 x 240 padded tokens in two passes."""
    widths = [704] + [240] * 15
    assert cap_only(widths, 16384) == [(0, 16)]
    assert plan_passes(widths, 16384) == [(0, 1), (1, 16)]


def test_rows_of_one_width_stay_one_pass_within_the_cap():
    assert plan_passes([512] * 32, 16384) == [(0, 32)]
    assert plan_passes([512] * 64, 16384) == [(0, 32), (32, 64)]
    assert plan_passes([40000, 16], 16384) == [(0, 1), (1, 2)]  # (wider than the cap: alone)
    assert plan_passes([], 16384) == []


def test_close_widths_share_a_pass():
    """A few tokens of padding cost less than another pass's fixed cost."""
    assert plan_passes([512, 496, 480, 480], 16384) == [(0, 4)]


@pytest.mark.parametrize("seed", range(30))
def test_random_rows_in_order_within_the_cap_at_no_more_cost(seed):
    """Every row once, in order; each pass within the cap (or one row); the cost never above
    the cap-only grouping's (one of the splits the programme weighs)."""
    rnd = random.Random(seed)
    n = rnd.randint(1, 256)
    widths = sorted((rnd.choice([rnd.randint(1, 1024), 16 * rnd.randint(1, 64)])
                     for _ in range(n)), reverse=True)
    cap = rnd.choice([64, 1000, 3000, 4096, 16384])
    groups = plan_passes(widths, cap)
    check(widths, groups, cap)
    assert cost(widths, groups) <= cost(widths, cap_only(widths, cap))


@pytest.mark.parametrize("seed", range(40))
def test_the_least_cost_of_every_split(seed):
    """Against every split of up to 10 rows: none costs less."""
    rnd = random.Random(1000 + seed)
    widths = sorted((rnd.choice([16, 32, 48, 240, 704, rnd.randint(1, 1024)])
                     for _ in range(rnd.randint(1, 10))), reverse=True)
    cap = rnd.choice([100, 1024, 2000, 16384])
    groups = plan_passes(widths, cap)
    check(widths, groups, cap)
    assert cost(widths, groups) == min(cost(widths, g) for g in every_split(widths, cap))


def test_widths_must_come_longest_first_and_be_positive():
    with pytest.raises(ValueError, match="longest first"):
        plan_passes([16, 32], 1024)
    with pytest.raises(ValueError, match="at least 1"):
        plan_passes([16, 0], 1024)


def test_a_models_prefill_takes_the_groups_and_keeps_its_results(monkeypatch):
    """On the CPU model: a long prompt and short ones go through in two passes (one padded
    pass before), and each row's logits and state are those of the prompts fed one pass."""
    case = make_case("c512", with_reference=False)
    with one_thread():
        model = RWKV7(case.sd, case.cfg, prefill_chunk=256)
        passes, real = [], model._forward_padded

        def spy(parts, *a, **k):
            passes.append(sorted(len(p) for p in parts))
            return real(parts, *a, **k)

        monkeypatch.setattr(model, "_forward_padded", spy)
        prompts = [rand_tokens(n, 1024, n) for n in (20, 200, 17, 24, 19, 22)]
        st = model.new_state(len(prompts))
        out = model.prefill(prompts, st)
        assert passes == [[200], [17, 19, 20, 22, 24]]
        for i, p in enumerate(prompts):
            alone = model.new_state(1)
            assert rel_err(out[i], model.prefill([p], alone)[0]) < 5e-5
            assert rel_err(st.select([i]).wkv, alone.wkv) < 5e-5
        # a pass of consecutive rows (here rows 1 and 2, taken longest first: 2, 1) runs on
        # views of them, no copy, and leaves the other rows alone
        from server.model.state import State

        selects, real_select = [], State.select
        monkeypatch.setattr(State, "select", lambda self, idx: selects.append(idx) or
                            real_select(self, idx))
        prompts = [rand_tokens(n, 1024, 7 + n) for n in (200, 30, 40)]
        st = model.new_state(4)
        st.wkv[:, 3].normal_(generator=torch.Generator().manual_seed(3))
        row3 = st.wkv[:, 3].clone()
        out = model.prefill(prompts, st.rows([0, 1, 2]))
        assert selects == [] and passes[-2:] == [[200], [30, 40]]
        assert torch.equal(st.wkv[:, 3], row3)
        for i, p in enumerate(prompts):
            alone = model.new_state(1)
            assert rel_err(out[i], model.prefill([p], alone)[0]) < 5e-5
            assert rel_err(st.wkv[:, i], alone.wkv[:, 0]) < 5e-5


def test_the_engine_gathers_rows_longest_first_so_each_pass_is_views(tiny_loader, monkeypatch):
    """Scattered slots of unequal prompts: the engine gathers their states once, longest first,
    and the model's passes (the two long rows, the two short ones) run on views of that copy
    (each pass gathered its rows again before: 474 MiB at a served load's peak, session 69);
    every slot ends as when fed alone, its first logits too."""
    from server.bench.common import DummyTask
    from server.model.state import State
    from server.scheduler.engine import BatchEngine

    model = tiny_loader.model
    slots, lens = [5, 1, 3, 6], [20, 200, 17, 210]
    prompts = [rand_tokens(n, model.cfg.vocab_size, n) for n in lens]

    def engine():
        e = BatchEngine(model)
        e.resize(8, [])
        e.load(list(range(8)), [DummyTask(seed=i) for i in range(8)])
        return e

    batched, alone = engine(), engine()
    selects, real = [], State.select
    monkeypatch.setattr(State, "select", lambda self, idx: selects.append(idx) or real(self, idx))
    passes, forward = [], model._forward_padded
    monkeypatch.setattr(model, "_forward_padded",
                        lambda parts, *a, **k: passes.append(len(parts)) or forward(parts, *a, **k))
    with one_thread():
        batched.prefill(slots, prompts, first={1, 6})
        assert passes == [2, 2] and selects == [[6, 1, 5, 3]]
        for s, p in zip(slots, prompts):
            alone.prefill([s], [p], first={s} & {1, 6})
    for s in slots:
        a, b = batched.state.select([s]), alone.state.select([s])
        assert rel_err(a.wkv, b.wkv) < 5e-5 and rel_err(a.shift, b.shift) < 5e-5
    for s in (1, 6):
        assert rel_err(batched._first[s], alone._first[s]) < 5e-5
    # consecutive slots whose prompts are not longest first: one gathered copy in that order
    # (at most the engine's gather budget), not a copy a pass; slots in that order: views
    selects.clear()
    passes.clear()
    with one_thread():
        batched.prefill([2, 3, 4, 7], [prompts[k] for k in (0, 2, 1, 3)])
        assert selects == [[7, 4, 2, 3]] and passes == [2, 2]
        selects.clear()
        batched.prefill([2, 3], [prompts[3], prompts[1]])
        assert selects == []
