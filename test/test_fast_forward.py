"""Fast-forward of constrained replies (server/scheduler/guide.py, ``cycle._fast_forward``): the
tokens a grammar forces are fed in one prefill pass instead of a decode step each. On the CPU
with the tiny random model: the replies are the ones step-by-step decoding gives (the same
tokens, the same draws after them: penalties and random streams count the fed tokens), in
fewer steps; they do not depend on where pulses end; a row asking for log probabilities is
decoded step by step; ``max_tokens`` still bounds the reply."""

import pytest
from constrained_cases import SCHEMA, record_fed_runs, replays

import server.scheduler.guide as guide
from server.api.tools import ToolSpec, forced_call_grammar
from server.scheduler import DynamicScheduler
from server.task.constraint import Constraint, json_grammar

PARAMS = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
          "properties": {"city": {"type": "string", "maxLength": 12},
                         "unit": {"enum": ["celsius", "fahrenheit"]}}}
CALL = forced_call_grammar([ToolSpec("get_weather", "", PARAMS), ToolSpec("get_time", "", {})],
                           {"type": "function", "function": {"name": "get_weather"}}, lead=">")
SAMPLED = dict(temperature=1.0, top_k=0, top_p=1.0)


def run(loader, specs, buffer_size=8, max_batch_size=8, off=False, monkeypatch=None):
    """Run ``specs`` (dicts: prompt, grammar, max_tokens, sampling...) together; returns the
    tasks and the decode steps the scheduler ran. ``off``: fast-forward disabled."""
    if off:
        monkeypatch.setattr(guide, "FF_MIN", 10**9)
    sched = DynamicScheduler(loader, max_batch_size=max_batch_size, buffer_size=buffer_size)
    tasks = []
    for spec in specs:
        spec = dict(spec)
        grammar, logprobs = spec.pop("grammar", None), spec.pop("logprobs", None)
        task = sched.new_task(spec.pop("prompt"), **spec)
        task.logprobs = logprobs
        if grammar is not None:
            task.constraint = Constraint(grammar, loader.tokenizer)
        tasks.append(task)
    sched.run()
    if off:
        monkeypatch.undo()
    # (every token of the replies counted as generated, fed ones too: /metrics reports them)
    assert sched.stats.generated_tokens == sum(len(t.output) for t in tasks)
    return tasks, sum(p["steps"] for p in sched.pulses)


def prompt(loader, i):
    return loader.encode(f"User: weather {i}?\n\nAssistant: <think>\n</think")


def test_a_forced_call_is_the_same_reply_in_fewer_steps(tiny_loader, monkeypatch):
    specs = [dict(prompt=prompt(tiny_loader, i), grammar=CALL, max_tokens=80, seed=i,
                  presence_penalty=0.7, repetition_penalty=0.3, penalty_decay=0.9, **SAMPLED)
             for i in range(3)]
    specs.append(dict(prompt=prompt(tiny_loader, 9), grammar=CALL, max_tokens=80,
                      temperature=0.0))
    fast, fast_steps = run(tiny_loader, specs[:1])
    slow, slow_steps = run(tiny_loader, specs[:1], off=True, monkeypatch=monkeypatch)
    assert fast[0].output == slow[0].output and fast[0].finish_reason == "stop"
    text = tiny_loader.decode(fast[0].output)
    assert '<tool_call>{"name":"get_weather","arguments":{"city":"' in text, text
    assert replays(tiny_loader, CALL, fast[0].output)
    assert fast_steps <= slow_steps - 15, (fast_steps, slow_steps)  # the call's head: 13 fed
    fast, _ = run(tiny_loader, specs)  # sampled with penalties, greedy; batched
    slow, _ = run(tiny_loader, specs, off=True, monkeypatch=monkeypatch)
    assert [t.output for t in fast] == [t.output for t in slow]
    assert all(t.finish_reason == "stop" and replays(tiny_loader, CALL, t.output) for t in fast)


def test_where_pulses_end_changes_no_reply(tiny_loader, monkeypatch):
    """A row arms and pauses where its tokens say, not where a pulse ends, so each token goes
    into the state the same way (a decode step or a forced run's pass: their bits differ):
    the same replies, and the same runs fed at the same points of each reply, with pulses of
    1, 2, 3 or 16 steps, alone or beside rows that come and go."""
    fed = record_fed_runs(monkeypatch)
    specs = [dict(prompt=prompt(tiny_loader, i), grammar=CALL, max_tokens=60, seed=i,
                  presence_penalty=0.5, **SAMPLED) for i in range(2)]
    others = [dict(prompt=tiny_loader.encode(f"User: story {i}\n\nAssistant:"),
                   max_tokens=3 + 7 * i, **SAMPLED, seed=10 + i) for i in range(3)]
    seen = set()
    for buffer_size in (1, 2, 3, 16):
        for extra in ([], others):
            fed.clear()
            tasks, _ = run(tiny_loader, specs + extra, buffer_size=buffer_size)
            seen.add((tuple(tuple(t.output) for t in tasks[:2]), tuple(sorted(fed))))
    assert len(seen) == 1
    (_, runs), = seen
    assert len(runs) >= 4 and all(len(run) >= guide.FF_MIN - 1 for *_, run in runs), runs


def test_a_row_asking_for_logprobs_is_decoded_step_by_step(tiny_loader, monkeypatch):
    spec = dict(prompt=prompt(tiny_loader, 1), grammar=CALL, max_tokens=60, temperature=0.0,
                logprobs=2)
    (task,), steps = run(tiny_loader, [spec])
    assert len(task.output_logprobs) == len(task.output) and steps >= len(task.output)
    (plain,), _ = run(tiny_loader, [spec], off=True, monkeypatch=monkeypatch)
    assert plain.output == task.output


@pytest.mark.parametrize("max_tokens", [3, 4, 9, 16])
def test_max_tokens_bounds_a_fast_forwarded_reply(tiny_loader, monkeypatch, max_tokens):
    """A forced run longer than what the round has left is cut (its last token comes from a
    step): the reply is the step-by-step one, max_tokens long."""
    spec = dict(prompt=prompt(tiny_loader, 2), grammar=CALL, max_tokens=max_tokens,
                temperature=0.0)
    (task,), _ = run(tiny_loader, [spec])
    (plain,), _ = run(tiny_loader, [spec], off=True, monkeypatch=monkeypatch)
    assert task.output == plain.output and len(task.output) == max_tokens
    assert task.finish_reason == "length" and replays(tiny_loader, CALL, task.output)


def test_a_schema_reply_with_forced_keys(tiny_loader, monkeypatch):
    """A schema's forced keys and closing braces: the replies step-by-step decoding gives."""
    grammar = json_grammar(SCHEMA)
    specs = [dict(prompt=prompt(tiny_loader, i), grammar=grammar, max_tokens=60, seed=i,
                  **SAMPLED) for i in range(4)]
    fast, _ = run(tiny_loader, specs)
    slow, _ = run(tiny_loader, specs, off=True, monkeypatch=monkeypatch)
    assert [t.output for t in fast] == [t.output for t in slow]


def test_a_stop_asked_when_a_forced_run_arrives_ends_the_reply(tiny_loader):
    """A client that stops the task as the forced run's text reaches it (a stop string in
    it, a closed stream): the reply ends there, aborted, its slot free; nothing hangs."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=8)
    task = sched.new_task(prompt(tiny_loader, 3), max_tokens=60, temperature=0.0)
    task.constraint = Constraint(CALL, tiny_loader.tokenizer)
    cut = []

    def collect(tokens):
        if getattr(task, "_forced_feed", False) and not cut:  # (a forced run, its feed ahead)
            cut.append(len(task.output))
            task.stop()

    task.collect_callback = collect
    free = sched.new_task(tiny_loader.encode("User: hi\n\nAssistant:"), max_tokens=20,
                          temperature=0.0)
    sched.run()
    assert cut and task.finish_reason == "abort" and len(task.output) == cut[0]
    assert len(free.output) == 20 and sched.num_active == 0


@pytest.mark.parametrize("graphed", [False, True])
def test_forced_runs_are_fed_apart_and_their_rows_stay_running(tiny_loader, monkeypatch,
                                                               graphed):
    """Four replies pausing together (one request's n=4 choices) have their runs fed apart
    from prompts, in passes of as many rows as keep each row's bits (two here, as if on a GPU
    whose WKV took another form past two rows; session 47's review: a reply's bits depended
    on its neighbours), or one row a pass where single-sequence passes replay CUDA graphs
    (``graphed``), with each row's next token from that pass: the replies are the lone
    ones; the tasks read RUNNING throughout (a client polling the Task API's status saw
    PREFILL mid-reply, then READY as the row started again: session 47's soak)."""
    from server.scheduler.engine import BatchEngine
    from server.task.task import Status, Task

    passes, statuses = [], set()
    real_prefill, real_start = BatchEngine.prefill, BatchEngine.start

    def prefill(self, slots, token_lists, first=(), mid=()):
        fed = [sched.slots[s] for s in slots]
        forced = [t._forced_feed for t in fed]
        passes.append((len(slots), any(forced), all(forced), set(first) == set(slots)))
        statuses.update(t.status for t, f in zip(fed, forced) if f)
        return real_prefill(self, slots, token_lists, first, mid)

    def start(self, slots, *args):  # (between _start_ready's status changes)
        statuses.update(t.status for t in (sched.slots[s] for s in slots) if t.output)
        return real_start(self, slots, *args)

    monkeypatch.setattr(BatchEngine, "prefill", prefill)
    monkeypatch.setattr(BatchEngine, "start", start)
    monkeypatch.setattr(type(tiny_loader.model), "pass_keeps_bits", lambda self, rows: rows <= 2)
    monkeypatch.setattr(type(tiny_loader.model), "graphed_prefill", property(lambda _: graphed))
    sched = DynamicScheduler(tiny_loader, max_batch_size=8, buffer_size=8)
    tasks = [sched.new_task(prompt(tiny_loader, 5), max_tokens=60, seed=i, **SAMPLED,
                            constraint=Constraint(CALL, tiny_loader.tokenizer))
             for i in range(4)]
    late = []

    def arrive(tokens):  # a prompt admitted in the step that feeds the first forced runs
        if not late and getattr(tasks[0], "_forced_feed", False):
            late.append(Task(prompt(tiny_loader, 6), max_tokens=2, temperature=0.0))
            sched.add_task(late[0])

    tasks[0].collect_callback = arrive
    sched.run()
    monkeypatch.undo()
    assert late and len(late[0].output) == 2
    forced = [p for p in passes if p[1]]
    assert len(forced) >= 4 and all(rows <= (1 if graphed else 2) and unmixed and last
                                    for rows, _, unmixed, last in forced), passes
    assert graphed or any(rows == 2 for rows, *_ in forced)
    assert statuses == {Status.RUNNING}
    for i, task in enumerate(tasks):
        (alone,), _ = run(tiny_loader, [dict(prompt=prompt(tiny_loader, 5), grammar=CALL,
                                             max_tokens=60, seed=i, **SAMPLED)])
        assert task.output == alone.output and replays(tiny_loader, CALL, task.output)


def test_a_row_going_on_after_a_forced_run_does_not_ramp_again(tiny_loader):
    """Pulses ramp 1, 2, 4, ... steps after a task starts (its first text out at once); a row
    going on after its forced run (that text out already) keeps the pulse length instead: a
    lone forced call here ran pulses of [1, 1, 4, 5, 1] steps, [1, 1, 1, 2, 4, 2, 1] when
    each resume ramped again (greedy; the tiny random model)."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=16)
    task = sched.new_task(prompt(tiny_loader, 0), max_tokens=80, temperature=0.0,
                          constraint=Constraint(CALL, tiny_loader.tokenizer))
    sched.run()
    assert task.finish_reason == "stop" and replays(tiny_loader, CALL, task.output)
    assert len(sched.pulses) <= 5, [p["steps"] for p in sched.pulses]
