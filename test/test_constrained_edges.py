"""Constrained decoding at its edges (session 54's review): a model of fewer tokens than the
tokenizer (forced runs and masks past its vocabulary), and +inf logits at low temperatures; on
the CPU with tiny random models."""

import pytest
from constrained_cases import record_fed_runs, replays

import server.scheduler.guide as guide
from server.api.tools import ToolSpec, forced_call_grammar
from server.scheduler import DynamicScheduler
from server.task.constraint import Constraint

PARAMS = {"type": "object", "additionalProperties": False, "required": ["city"],
          "properties": {"city": {"type": "string", "maxLength": 8}}}
CALL = forced_call_grammar([ToolSpec("get_weather", "", PARAMS)],
                           {"type": "function", "function": {"name": "get_weather"}}, lead=">")


@pytest.fixture(scope="module")
def small_vocab_loader(tmp_path_factory):
    """A tiny random model of 50,000 tokens: fewer than the tokenizer's 65,536 ("arguments",
    a token a forced call's head forces, is 58155)."""
    from server.model.loader import RWKV070ModelLoader
    from server.model.random import main as make_random

    path = tmp_path_factory.mktemp("v50000") / "v50000.pth"
    make_random([str(path), "--preset", "tiny", "--vocab", "50000", "--seed", "3"])
    return RWKV070ModelLoader(str(path), device="cpu")


def _forced_call(loader, fast: bool, monkeypatch):
    if not fast:
        monkeypatch.setattr(guide, "FF_MIN", 10**9)
    sched = DynamicScheduler(loader, max_batch_size=2, buffer_size=8)
    prompt = [t for t in loader.encode("User: weather?\n\nAssistant: <think>\n</think")
              if t < loader.cfg.vocab_size]  # ("</think" is 53326)
    task = sched.new_task(prompt, max_tokens=60, temperature=0.0)
    task.constraint = Constraint(CALL, loader.tokenizer)
    free = sched.new_task(list(prompt), max_tokens=30, temperature=0.0)
    sched.run()
    monkeypatch.undo()
    return task, free


def test_a_forced_run_never_feeds_tokens_past_a_smaller_models_vocabulary(small_vocab_loader,
                                                                          monkeypatch):
    """A model of fewer tokens than the tokenizer: its masks allow only its own ids, and so
    must a fast-forward (a forced id past the model's V, fed to its embedding, failed the
    whole batch; on CUDA an out-of-bounds index breaks the device's context). The reply and
    its end are the step-by-step ones, ids < V; the row beside it is untouched."""
    V = small_vocab_loader.cfg.vocab_size
    slow, slow_free = _forced_call(small_vocab_loader, False, monkeypatch)
    fed = record_fed_runs(monkeypatch)
    fast, fast_free = _forced_call(small_vocab_loader, True, monkeypatch)
    assert fed and all(max(run) < V for *_, run in fed), fed  # (runs were fed, cut at V)
    assert (fast.finish_reason, fast.error) == (slow.finish_reason, slow.error)
    assert "IndexError" not in str(fast.error)
    assert fast_free.finish_reason == "length", fast_free.error
    assert max(fast.output) < V and fast.output == slow.output
    assert fast_free.output == slow_free.output
    assert replays(small_vocab_loader, CALL, fast.output)


def test_a_reply_its_grammar_leaves_no_token_of_the_model_is_an_error(small_vocab_loader,
                                                                      monkeypatch):
    """Where the grammar allows only ids past a smaller model's V (a forced call's
    "arguments", 58155), the row is let end at end-of-text (guide.py): the reply is cut off
    mid-call, no whole sentence of its grammar, so it is an error naming that, not a "stop"
    handing the cut text out as complete (it was: '><tool_call>{"name":"get_weather","')."""
    for fast in (False, True):
        task, free = _forced_call(small_vocab_loader, fast, monkeypatch)
        assert not replays_whole(small_vocab_loader, CALL, task.output)
        assert task.finish_reason == "error", (task.finish_reason, task.output)
        assert "could not follow its grammar" in task.error
        assert "vocabulary" in task.error
        assert free.finish_reason == "length"


def replays_whole(loader, grammar: str, tokens: list[int]) -> bool:
    """``tokens`` are a whole sentence of ``grammar`` (a fresh state takes each, then ends)."""
    c = Constraint(grammar, loader.tokenizer)
    return all(c.accept(t) for t in tokens) and c.complete


@pytest.mark.parametrize("temperature", [1.0, 0.5, 0.1, 2e-5])
def test_an_infinite_logit_allowed_is_drawn_at_any_temperature(tiny_loader, temperature):
    """A +inf logit (an overflowing half-precision head) on a token the grammar allows: the
    guide makes it a large finite value (+inf - inf would be NaN), which must stay finite once
    divided by a temperature below 1, else every weight is NaN and the draw lands anywhere
    (a token past the grammar's: 65535 with top-p, 43 with top-k, at temperature 0.5). Every
    sampler path (whole vocabulary, top-k, sorted top-p) draws an allowed token."""
    import numpy as np
    import torch

    from server.model.sampler import BatchSampler, SamplingBatch
    from server.scheduler.guide import Guide
    from server.task.constraint import fill_masks, json_grammar

    V, rows = 65536, 3
    cs = {r: Constraint(json_grammar(None), tiny_loader.tokenizer) for r in range(rows)}
    words = np.zeros((1, cs[0].words), dtype=np.int32)
    fill_masks([(cs[0], 0)], words)
    allowed = set(np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")))
    logits = torch.randn(rows, V, generator=torch.Generator().manual_seed(1))
    logits[:, sorted(allowed)[3]] = float("inf")
    batch = SamplingBatch.empty(rows, V)
    batch.temperature[:] = temperature
    batch.top_k[:] = torch.tensor([0, 50, 0], dtype=torch.int32)
    batch.top_p[:] = torch.tensor([1.0, 0.9, 0.9])
    tokens = BatchSampler(V).sample(Guide(cs, V, "cpu", 0).apply(logits), batch)
    assert all(t in allowed for t in tokens.tolist()), tokens
