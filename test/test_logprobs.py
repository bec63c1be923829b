"""Log probabilities of generated tokens (Task.logprobs; server/scheduler/logprobs.py), on the CPU.

Each entry must be the model's own distribution at that step: the log-softmax of the logits the
model gives after the prompt and the tokens before (computed here by a fresh prefill of that
sequence), whatever the sampler did with them (penalties, temperature, top-k/top-p).
"""

import math

import pytest
import torch

from server.scheduler import DynamicScheduler


def reference_logprobs(loader, prompt: list[int], output: list[int]) -> list[torch.Tensor]:
    """log_softmax of the logits after prompt + output[:s], for each s (fp32, a prefill each)."""
    m = loader.model
    out = []
    for s in range(len(output)):
        state = m.new_state(1)
        logits = m.prefill([prompt + output[:s]], state)[0]
        out.append(torch.log_softmax(logits.double(), -1))
    return out


def check_entries(loader, task, prompt: list[int], top: int) -> None:
    assert len(task.output_logprobs) == len(task.output) > 0
    ref = reference_logprobs(loader, prompt, task.output)
    for s, (tok, (lp, ids, vals)) in enumerate(zip(task.output, task.output_logprobs)):
        assert lp == pytest.approx(ref[s][tok].item(), abs=2e-3), (s, tok)
        assert len(ids) == len(vals) == top
        assert vals == sorted(vals, reverse=True)
        want = torch.topk(ref[s], top)
        # the same alternatives (the tiny model's logits have no near-ties at the top here)
        assert ids == want.indices.tolist(), s
        assert vals == pytest.approx(want.values.tolist(), abs=2e-3)
        assert lp <= 0 and all(v <= 0 for v in vals)


def test_logprobs_are_the_models_distribution_in_a_changing_batch(tiny_loader):
    """Tasks asking for logprobs (greedy and sampled, with penalties and top-k/top-p) among
    tasks that do not, joining and leaving (the capacity grows and shrinks: slots move): every
    entry is its own token's, none goes to a task that did not ask."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=8, buffer_size=3)
    prompts = [tiny_loader.encode(f"User: question {i}{' more' * i}\n\nAssistant:")
               for i in range(6)]
    kinds = [dict(temperature=0.0), dict(temperature=1.3, top_k=7, top_p=0.8,
                                         presence_penalty=1.0, repetition_penalty=0.5,
                                         penalty_decay=0.9, seed=5),
             dict(temperature=0.8, top_k=0, top_p=1.0, seed=9)]
    tasks = []
    for i, p in enumerate(prompts):
        task = sched.new_task(list(p), max_tokens=3 + 2 * i, **kinds[i % 3])
        if i % 2 == 0:
            task.logprobs = [3, 0, 5][i // 2]
        tasks.append(task)
    sched.run()
    for i, (task, p) in enumerate(zip(tasks, prompts)):
        if i % 2:
            assert task.output_logprobs == []
            continue
        check_entries(tiny_loader, task, p, [3, 0, 5][i // 2])
    greedy = tasks[0]  # temperature 0: the chosen token is the most likely one
    assert all(lp == vals[0] and tok == ids[0]
               for tok, (lp, ids, vals) in zip(greedy.output, greedy.output_logprobs))


def test_logprobs_follow_each_round_and_an_alternatives_cap(tiny_loader):
    """A continued task's entries are its new round's; more than 20 alternatives are cut to 20
    (TOP_MAX); an entry's values are proper log probabilities (their exp sums to <= 1)."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    p = tiny_loader.encode("User: hi\n\nAssistant:")
    task = sched.new_task(list(p), max_tokens=4, temperature=0.0)
    task.logprobs = 50
    sched.run()
    first = list(task.output)
    assert len(task.output_logprobs) == 4 and all(len(i) == len(v) == 20
                                                  for _, i, v in task.output_logprobs)
    assert all(math.fsum(math.exp(x) for x in v) <= 1 + 1e-6 for _, _, v in task.output_logprobs)
    task.continue_gen(" more", max_tokens=3)
    sched.add_task(task)
    sched.run()
    assert len(task.output) == len(task.output_logprobs) == 3
    check_entries(tiny_loader, task, p + first + tiny_loader.encode(" more"), 20)


def test_logprobs_stay_with_their_task_when_the_batch_shrinks(tiny_loader):
    """The asking task sits in the last slot; the others end first, the capacity shrinks and
    its row moves to slot 0 (compaction): its entries go on being its own."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=2)
    prompts = [tiny_loader.encode(f"User: q{i}\n\nAssistant:") for i in range(4)]
    tasks = [sched.new_task(list(p), max_tokens=12 if i == 3 else 1, temperature=0.0)
             for i, p in enumerate(prompts)]
    tasks[3].logprobs = 2
    sched.run()
    check_entries(tiny_loader, tasks[3], prompts[3], 2)
    assert [len(t.output_logprobs) for t in tasks[:3]] == [0, 0, 0]
    assert min(p["cap"] for p in sched.pulses) < max(p["cap"] for p in sched.pulses)


def test_score_gives_each_tokens_log_probability_after_the_ones_before(tiny_loader):
    """``RWKV7.score``: over a sequence cut in two calls (the state carried), each token's log
    probability after the tokens before it and the top alternatives are those of a prefill of
    that prefix; the state it leaves continues as a prefill's does."""
    m = tiny_loader.model
    seq = tiny_loader.encode("User: what is a cat?\n\nAssistant: A cat is an animal.")
    state = m.new_state(1)
    parts = [m.score(seq[:9], seq[1:10], state, top=4), m.score(seq[9:], seq[10:], state, top=4)]
    chosen = torch.cat([p[0] for p in parts])
    vals = torch.cat([p[1] for p in parts])
    ids = torch.cat([p[2] for p in parts])
    assert chosen.shape == (len(seq) - 1,) and ids.shape == (len(seq) - 1, 4)
    for i in range(1, len(seq)):
        ref = torch.log_softmax(m.prefill([seq[:i]], m.new_state(1))[0].double(), -1)
        assert chosen[i - 1].item() == pytest.approx(ref[seq[i]].item(), abs=2e-3), i
        top = ref.topk(4)
        assert ids[i - 1].tolist() == top.indices.tolist()
        assert vals[i - 1].tolist() == pytest.approx(top.values.tolist(), abs=2e-3)
    after = m.new_state(1)
    m.prefill([seq], after)
    assert torch.allclose(state.wkv, after.wkv, atol=1e-4) and \
        torch.allclose(state.shift, after.shift, atol=1e-4)
    nothing = m.score([5], [], m.new_state(1), top=2)
    assert nothing[0].shape == (0,) and nothing[2] is None or nothing[2].shape[0] == 0
    with pytest.raises(ValueError):
        m.score([5], [1, 2], m.new_state(1))


def test_score_in_passes_and_through_the_padded_graph_pass_matches_each_prefix():
    """``RWKV7.score`` of a sequence longer than the model's pass (prefill_chunk 16: three
    passes, the head in blocks of 5 positions that straddle them), plain and through
    GraphedPrefill's padded pass (eager here; on CUDA replayed from the prefill graphs): each
    token's log probability is a prefill of its prefix's, and the state is a prefill's."""
    from server.model.checkpoint import infer_config
    from server.model.cuda_graph import GraphedPrefill
    from server.model.forward import RWKV7
    from server.model.random import make_random_state_dict

    sd = make_random_state_dict(2, 128, 512, seed=3)
    cfg = infer_config(sd)
    plain = RWKV7(sd, cfg, prefill_chunk=16)
    padded = RWKV7(sd, cfg, prefill_chunk=16)
    padded._graphed_prefill = GraphedPrefill(padded._forward, padded.new_state, graphs=False,
                                             max_tokens=16)
    seq = [(37 * i + 11) % 512 for i in range(45)]
    for m in (plain, padded):
        state = m.new_state(1)
        chosen, vals, ids = m.score(seq, seq[1:], state, top=3, rows=5)
        assert chosen.shape == (44,) and ids.shape == (44, 3)
        for i in range(1, len(seq)):
            ref = torch.log_softmax(plain.prefill([seq[:i]], plain.new_state(1))[0].double(), -1)
            assert chosen[i - 1].item() == pytest.approx(ref[seq[i]].item(), abs=1e-4), i
            assert ids[i - 1].tolist() == ref.topk(3).indices.tolist(), i
        after = plain.new_state(1)
        plain.prefill([seq], after)
        assert torch.allclose(state.wkv, after.wkv, atol=1e-5) and \
            torch.allclose(state.shift, after.shift, atol=1e-5)
    with pytest.raises(ValueError, match="1-16 tokens"):
        padded._graphed_prefill(seq[:17], padded.new_state(1))


def test_a_scoring_job_leaves_the_queue_before_its_result_wakes_the_caller(tiny_loader,
                                                                          monkeypatch):
    """A finished (or failed) job is off the queue when its future resolves: the caller it
    wakes queues the request's tasks next, and the finished job's place counted against
    ``max_queue`` gave a spurious 503 (session 45's QA: 2 of 300 on an idle server)."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=2, prefill_chunk=8)
    ok, bad = sched.score(list(range(10, 30)), top=1), sched.score([1, 2, 3])
    queued = []
    for fut in (ok, bad):
        fut.add_done_callback(lambda f: queued.append(len(sched._scores)))
    model, real = sched.engine.model, sched.engine.model.score

    def score(tokens, *a, **k):  # (the second job's pass fails)
        if tokens[0] == 1:
            raise RuntimeError("a pass failed")
        return real(tokens, *a, **k)

    monkeypatch.setattr(model, "score", score)
    assert sched.num_scoring == 2  # (/health's "scoring")
    sched.run()
    assert sched.num_scoring == 0
    assert len(ok.result(timeout=0)) == 19 and isinstance(bad.exception(timeout=0), RuntimeError)
    assert queued == [1, 0]  # (the other job's place only)


def test_scoring_jobs_take_turns_a_pass_each(tiny_loader):
    """A long prompt (5 passes of 8 tokens) queued first does not hold a short one (one pass)
    for all its passes: the short one ends after the long one's first pass; both are right."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=2, prefill_chunk=8)
    long_seq, short_seq = [10 + i for i in range(40)], [3, 4, 5, 6]
    ended = []
    long_job = sched.score(long_seq)
    short_job = sched.score(short_seq)
    for name, fut in (("long", long_job), ("short", short_job)):
        fut.add_done_callback(lambda f, name=name: ended.append((name, sched.iteration)))
    sched.run()
    assert [n for n, _ in ended] == ["short", "long"]
    m = tiny_loader.model
    for seq, fut in ((long_seq, long_job), (short_seq, short_job)):
        want = m.score(seq, seq[1:], m.new_state(1))[0].tolist()
        assert [e[0] for e in fut.result(timeout=0)] == pytest.approx(want, abs=1e-5)


def test_at_most_score_live_long_prompts_are_part_way_at_once(tiny_loader, monkeypatch):
    """Six long prompts (3 passes each) and then a short one: at most SCORE_LIVE hold a state
    between passes at any pass (each a one-row state: 21 MB at 2.9B), the short one (one pass:
    no state kept) still takes its turn at once, and every result is right."""
    from server.scheduler.base import SCORE_LIVE

    sched = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=2, prefill_chunk=8)
    model, real = sched.engine.model, sched.engine.model.score
    live = []

    def score(*a, **k):
        live.append(sum(1 for j in sched._scores if j.pos > 0))  # (states kept between)
        return real(*a, **k)

    monkeypatch.setattr(model, "score", score)
    seqs = [[10 + 7 * i + j for j in range(20)] for i in range(6)] + [[3, 4, 5]]
    futs = [sched.score(s) for s in seqs]
    ended = []
    for i, fut in enumerate(futs):
        fut.add_done_callback(lambda f, i=i: ended.append(i))
    sched.run()
    assert max(live) == SCORE_LIVE < 6
    assert ended[0] == 6  # (its turn came while four long ones were part way)
    for seq, fut in zip(seqs, futs):
        want = real(seq, seq[1:], model.new_state(1))[0].tolist()
        assert [e[0] for e in fut.result(timeout=0)] == pytest.approx(want, abs=1e-5)


def test_scheduler_scores_prompts_between_its_steps(tiny_loader):
    """``score``: a prompt longer than a pass (prefill_chunk 8: several steps) scored while
    other tasks decode gives the model's values; the decoding tasks' tokens are as alone; bad
    input is refused at once; a shutdown fails jobs not done."""
    from server.scheduler import DynamicScheduler

    seq = tiny_loader.encode("User: tell me about the moon and the sun\n\nAssistant: The moon")
    alone = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=3)
    t_alone = alone.new_task(seq[:5], max_tokens=12, temperature=0.0)
    alone.run()

    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=3, prefill_chunk=8)
    task = sched.new_task(seq[:5], max_tokens=12, temperature=0.0)
    fut = sched.score(seq, top=2)
    sched.run()
    assert task.output == t_alone.output
    entries = fut.result(timeout=0)
    assert len(entries) == len(seq) - 1
    m = tiny_loader.model
    for i, (lp, ids, vals) in enumerate(entries, 1):
        ref = torch.log_softmax(m.prefill([seq[:i]], m.new_state(1))[0].double(), -1)
        assert lp == pytest.approx(ref[seq[i]].item(), abs=2e-3), i
        assert ids == ref.topk(2).indices.tolist() and len(vals) == 2
    one = sched.score([7])
    sched.run()
    assert one.result(timeout=0) == []  # one token: nothing follows anything
    for bad, top in (([], 0), ([1, 1 << 20], 0), ([1, 2], 21), ([1, 2], -1)):
        with pytest.raises(ValueError):
            sched.score(bad, top)
    pending = sched.score(seq)
    sched.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        pending.result(timeout=5)


def test_prompts_to_score_wait_as_tasks_do(tiny_loader):
    """A scoring job takes a place in the queue: past ``max_in_flight`` (slots + max_queue)
    the next one, or task, is refused with QueueFull instead of piling up."""
    from server.scheduler import DynamicScheduler, QueueFull

    sched = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=2, max_queue=1)
    first, second = sched.score([1, 2, 3]), sched.score([4, 5])
    with pytest.raises(QueueFull):
        sched.score([6, 7])
    with pytest.raises(QueueFull):
        sched.new_task([8, 9], max_tokens=1)
    sched.run()
    assert len(first.result(timeout=0)) == 2 and len(second.result(timeout=0)) == 1
    sched.score([6, 7])  # room again
    sched.run()


def test_a_cancelled_scoring_job_is_dropped_at_its_next_pass(tiny_loader):
    """A job's future can be cancelled while it runs (its client left): the scheduler drops it
    at its next pass instead of scoring the rest."""
    from server.scheduler import DynamicScheduler

    sched = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=2, prefill_chunk=4)
    fut = sched.score(list(range(10, 50)), top=1)
    sched.step()  # its first pass
    job = sched._scores[0]
    assert job.pos == 4 and fut.cancel()
    sched.step()
    assert not sched._scores and job.pos == 4 and job.state is None


def test_scoring_jobs_whose_clients_left_free_their_places_at_the_next_step(tiny_loader):
    """Every job whose future was cancelled (its client left) is off the queue after the next
    step, as a stopped waiting task is. It was dropped only when its turn came, one job a step:
    a long one not yet started waited behind ``SCORE_LIVE`` jobs part way through until one of
    them ended, holding a place of ``max_queue`` meanwhile (new work refused for room there
    was)."""
    from server.scheduler import DynamicScheduler
    from server.scheduler.base import SCORE_LIVE

    sched = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=2, prefill_chunk=4,
                             max_queue=SCORE_LIVE + 2)
    long_seq = list(range(10, 50))  # 10 passes each
    live = [sched.score(long_seq) for _ in range(SCORE_LIVE)]
    for _ in range(SCORE_LIVE):
        sched.step()  # a pass each: all part way
    assert all(job.started for job in sched._scores)
    left = [sched.score(long_seq) for _ in range(2)]
    assert all(fut.cancel() for fut in left)
    sched.step()
    assert len(sched._scores) == SCORE_LIVE
    sched.check_room(3)  # (the slot and two places: the ones the clients that left held)
    for fut in live:
        fut.cancel()
    sched.run()
    assert not sched._scores
