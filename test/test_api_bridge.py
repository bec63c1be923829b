"""The handlers' hand-over with the scheduler thread (``bridge``), following a choice until its
consumer leaves or it ends (``completion.run_choices``) and inline tokenising (``encoding``)."""

import asyncio
import json
import threading
import time

import pytest
import torch

from server.api import encoding
from server.api.bridge import UnderWay, _Waker
from server.api.completion import Choice, make_tasks, run_choices
from server.api.splitter import OutputSplitter
from server.model.tokenizer import Tokenizer
from server.task.task import Task


class ThreadLoader:
    """``encode`` that records the thread it ran on."""

    def __init__(self):
        self.tokenizer = Tokenizer()
        self.threads = []

    def encode(self, text):
        self.threads.append(threading.get_ident())
        return self.tokenizer.encode(text)


def test_encode_inline_when_short_else_in_a_thread():
    loader = ThreadLoader()
    limit = encoding.INLINE_BYTES
    texts = ["Hello, world", "a" * limit, "a" * (limit + 1), "é" * (limit // 2 + 1)]

    async def main():
        return [await encoding.encode(loader, t) for t in texts]

    tokens = asyncio.run(main())
    assert tokens == [loader.tokenizer.encode(t) for t in texts]
    here = threading.get_ident()
    assert [t == here for t in loader.threads] == [True, True, False, False]
    assert encoding.is_short("é" * (limit // 2)) and not encoding.is_short("é" * (limit // 2 + 1))


def test_waker_wakes_times_out_and_keeps_an_early_change():
    async def main():
        task = Task(task_id="TMP_w")
        waker = _Waker(task)
        task._notify()  # a change while nobody waits: the next wait returns at once
        t0 = time.perf_counter()
        await waker.wait(5)
        assert time.perf_counter() - t0 < 1
        t0 = time.perf_counter()
        await waker.wait(0.05)  # nothing changes: the timeout ends it
        assert 0.04 < time.perf_counter() - t0 < 1
        threading.Timer(0.02, task._append_output, args=([1],)).start()
        t0 = time.perf_counter()
        await waker.wait(5)  # woken from another thread
        assert time.perf_counter() - t0 < 1
        waker.close()
        assert not task._listeners

    asyncio.run(main())


def test_one_choice_closed_with_its_consumer():
    tok = Tokenizer()

    async def main():
        task = make_tasks([1, 2, 3], 1, {"max_tokens": 100}, None)[0]
        assert task.pending == [1, 2, 3]
        task._stop_hook = lambda t: None  # held by a "scheduler" that never finishes it
        choice = Choice(0, task, OutputSplitter("text", []))
        gen = run_choices([choice], tok)
        threading.Timer(0.02, task._append_output, args=(tok.encode(" hello"),)).start()
        got, piece = await asyncio.wait_for(gen.__anext__(), 5)
        assert got is choice and piece.text == " hello"
        assert len(task._listeners) == 1
        await gen.aclose()  # the consumer leaves: the task is stopped, the reader unsubscribed
        for _ in range(100):
            if not task._listeners:
                break
            await asyncio.sleep(0.01)  # (the reader's task ends on the loop's next turns)
        assert task.stop_requested and not task._listeners

    asyncio.run(main())


def test_one_choice_runs_to_its_end():
    tok = Tokenizer()

    async def main():
        task = make_tasks([1], 1, {"max_tokens": 2}, None)[0]
        choice = Choice(0, task, OutputSplitter("text", []))
        finished = []

        async def on_finish(c):
            finished.append(c.finish_reason)

        choice.on_finish = on_finish

        def run():
            task._append_output(tok.encode(" a"))
            task._append_output(tok.encode(" b"))
            task._finish("length")

        threading.Timer(0.02, run).start()
        events = [(c.index, p and p.text) async for c, p in run_choices([choice], tok)]
        assert "".join(t for _, t in events if t) == " a b" and events[-1] == (0, None)
        assert finished == ["length"] and choice.finish_reason == "length"

    asyncio.run(main())


def test_under_way_returns_when_fired_from_another_thread_or_at_its_limit():
    """``UnderWay.wait`` returns as soon as the scheduler thread fires the task's callback, and
    without it after its limit (a scheduler too busy to admit the task yet)."""
    async def main():
        fired = Task([1, 2])
        started = UnderWay(fired)
        assert fired.under_way_callback is not None
        t0 = time.perf_counter()
        threading.Timer(0.05, fired._under_way).start()
        await started.wait(limit=5.0)
        woken = time.perf_counter() - t0
        assert fired.under_way_callback is None  # once

        idle = UnderWay(Task([1, 2]))
        t0 = time.perf_counter()
        await idle.wait(limit=0.05)
        return woken, time.perf_counter() - t0

    woken, timed_out = asyncio.run(main())
    assert 0.04 < woken < 2.0
    assert 0.04 < timed_out < 2.0


def test_a_task_ended_before_its_pass_is_under_way():
    """A task that ends without a pass (stopped in the queue, failed) fires the callback too:
    nothing waits for it to its limit."""
    task, seen = Task([1, 2]), []
    task.under_way_callback = seen.append
    task._finish("abort")
    task._finish("abort")
    assert seen == [task]


def test_usage_counts_tokens_up_to_the_stop_string():
    """A pulse hands over several tokens at once: the choice's completion tokens are those up
    to the stop string's end, not every token the task made before it stopped (they varied
    with where the pulse ended: streamed and plain requests disagreed)."""
    tok = Tokenizer()
    ids = tok.encode(" one two STOP three four five")
    k = len(tok.encode(" one two STOP"))

    async def main():
        task = make_tasks([1], 1, {"max_tokens": 100}, None)[0]
        task._stop_hook = lambda t: t._finish("abort")  # a scheduler that stops it at once
        choice = Choice(0, task, OutputSplitter("text", ["STOP"]))
        threading.Timer(0.02, task._append_output, args=(ids,)).start()  # one pulse
        events = [(c.index, p and p.text) async for c, p in run_choices([choice], tok)]
        assert "".join(t for _, t in events if t) == " one two "
        assert choice.finish_reason == "stop" and len(task.get_all_tokens()) == len(ids)
        assert choice.completion_tokens == k < len(ids)

    asyncio.run(main())


def test_tasks_start_from_a_template_off_the_event_loop(monkeypatch):
    """Tasks start from the template in a worker thread, not on the event loop that serves
    every other request (the template's origin is a hash of its state, 21 MB at 2.9B, the first
    time; in a process using CUDA a pinned copy of it, once). They share its state's tensors: a copy
    each (up to 128 tasks a request) cost 16-18 ms at 2.9B on the 2-core machine."""
    from server.api import prefix
    from server.model.state import State
    from server.task import template_start

    threads = []
    copy = template_start.start_from
    monkeypatch.setattr(template_start, "start_from",
                        lambda t, tpl: (threads.append(threading.get_ident()), copy(t, tpl)))
    tpl = Task([5, 6], task_id="_tpl")
    tpl.history, tpl.pending, tpl.current_token = [1, 2, 3], [], 4
    tpl.state = State(torch.zeros(2, 2, 1, 8), torch.ones(2, 1, 1, 4, 4))
    tasks = make_tasks([9], 3, {"max_tokens": 1}, None)

    async def main():
        await prefix.prepare_tasks(None, tpl, tasks)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert len(threads) == 3 and loop_thread not in threads
    for t in tasks:
        assert t.pending == [4, 9] and t.history == [1, 2, 3] and t.cache_origin
        assert torch.equal(t.state.wkv, tpl.state.wkv)
        assert (t.state.wkv is tpl.state.wkv) != torch.cuda.is_initialized()  # (else: pinned)
    assert len({id(t.state.wkv) for t in tasks}) == 1  # one copy at most, for all


def test_a_reader_of_one_round_ends_with_it_when_a_continue_comes_first():
    """A stream of round 1 whose task is continued (round 2 under way) before the reader woke
    for round 1's end: it gets round 1's tokens, then its end; it ran on into round 2 from the
    same offset (``round1 + round2[k:]``, no end between them; session 22's QA, ~8 % of
    trials). A reader starting after the continue follows round 2."""
    from server.api.bridge import follow
    from server.task.task import Status

    tok = Tokenizer()
    r1, r2 = tok.encode(" one two three four"), tok.encode(" five six seven eight nine")

    async def main():
        task = Task(task_id="TASK_r")
        task.status = Status.RUNNING
        task._append_output(r1[:2])
        reader = follow(task, tok, poll=0.05)
        chunks = [await reader.__anext__()]
        task._append_output(r1[2:])
        task._finish("length")
        task.continue_gen([7])  # the next round, before the reader runs again
        task.status = Status.RUNNING
        task._append_output(r2)

        async def rest():
            return [c async for c in reader]
        chunks += await asyncio.wait_for(rest(), 5)  # (ran on, waiting for round 2's end)
        late = follow(task, tok, poll=0.05)
        first = await late.__anext__()
        task._finish("length")
        rest = [c async for c in late]
        return chunks, [first] + rest

    chunks, late = asyncio.run(main())
    assert "".join(c.text for c in chunks) == tok.decode(r1)
    assert chunks[-1].finished and sum(c.tokens for c in chunks) == len(r1)
    assert "".join(c.text for c in late) == tok.decode(r2) and late[-1].finished


async def _stream_begun(tok, first: str):
    """A running task's ``task_events`` with ``first`` generated and read: ``(task, events,
    [the header's data, first's])``."""
    from server.api.task_stream import task_events
    from server.task.task import Status

    task = Task(task_id="TASK_s")
    task.status = Status.RUNNING
    events = task_events(task, tok)
    task._append_output(tok.encode(first))
    return task, events, [(await events.__anext__()).data for _ in range(2)]


def test_a_stream_of_a_failed_round_says_so_when_a_continue_comes_as_its_end_is_sent():
    """GET /stream of a round that failed: its last text, then an error event, then [DONE].
    The failure was read after the last text had been sent: a continue landing meanwhile (a
    client retrying the task) reset the finish reason, and the stream ended with [DONE] as if
    the round had ended well (the SDKs then return quietly)."""
    tok = Tokenizer()

    async def main():
        task, events, got = await _stream_begun(tok, " one")
        task._append_output(tok.encode(" two"))
        task._finish("error", "injected")
        got.append((await events.__anext__()).data)  # " two", being sent
        task.continue_gen([5])  # another request's continue, meanwhile
        return got + [e.data async for e in events]

    events = asyncio.run(main())
    assert len(events) == 5 and events[-1] == "[DONE]", events  # (no error event: 4)
    assert [json.loads(e).get("data") for e in events[1:3]] == [" one", " two"]
    error = json.loads(events[3])
    assert error["error"] == {"message": "Generation failed: injected", "type": "server_error",
                              "param": None, "code": "generation_error"}  # (API.md's four)


def test_a_stream_event_counts_the_tokens_and_time_of_the_whole_character():
    """A character split over pulses: the pulse with its first bytes sends no event, and the
    event that shows it has its ``gen_time`` since the previous event and its ``speed`` over
    all its tokens (API.md). They were counted from its last pulse only: 2 of its 3 tokens,
    and the time since the pulse that showed nothing."""
    tok = Tokenizer()
    smile = tok.encode("\U0001F600")
    assert len(smile) == 3 and not tok.decode_bytes(smile[:1]).decode("utf-8", "ignore")

    async def main():
        task, events, got = await _stream_begun(tok, " a")
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, task._append_output, smile[:1])  # (a pulse that shows nothing)
        loop.call_later(0.2, task._append_output, smile[1:])
        got.append((await events.__anext__()).data)
        return got

    event = json.loads(asyncio.run(main())[2])
    assert event["data"] == "\U0001F600" and event["gen_time"] > 0.19  # (since " a")
    assert round(event["speed"] * event["gen_time"]) == 3  # tokens


def test_a_template_state_that_cannot_be_pinned_is_used_as_it_is(monkeypatch):
    """In a CUDA server a template's state is pinned once for fast loads; where pinning fails
    (no pinned memory to be had: here, a CPU machine told CUDA is in use), requests go on from
    the state as it is — a slower load, not a failed request — and the template keeps no
    pinned copy."""
    from server.model.state import State
    from server.task.template_start import start_all, start_from

    if torch.cuda.is_available():
        pytest.skip("pinning works here")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    tpl = Task([5, 6], task_id="_tpl_unpinned")
    tpl.history, tpl.pending, tpl.current_token = [1, 2, 3], [], 4
    tpl.state = State(torch.zeros(2, 2, 1, 8), torch.ones(2, 1, 1, 4, 4))
    task = make_tasks([9], 1, {"max_tokens": 1}, None)[0]
    start_from(task, tpl)
    assert task.state is tpl.state and tpl._pinned is None
    assert task.pending == [4, 9] and task.history == [1, 2, 3]
    # not marked prepared: later requests try again in a thread, never on the event loop
    # (marked, each retried the 21 MB pin inline; session 38's review)
    start_all(tpl, [make_tasks([9], 1, {"max_tokens": 1}, None)[0]])
    assert tpl._started_from is not tpl.state


def test_requests_from_a_template_start_inline_once_its_state_was_prepared(monkeypatch):
    """The first request from a template starts its tasks in a thread (the state's hash for its
    cache origin, and on CUDA its pinned copy: tens of ms at 2.9B, off the event loop); later
    requests from the same template state start inline, as the first did (a thread's two
    hand-overs saved on each request's time to first token). A template whose state was
    replaced is prepared in a thread again. ``find_template`` takes a template held in memory
    without a thread."""
    from server.api import prefix
    from server.model.state import State

    threads = []
    real = asyncio.to_thread

    async def counting(fn, *args):
        threads.append(getattr(fn, "__name__", fn))
        return await real(fn, *args)

    monkeypatch.setattr(prefix.asyncio, "to_thread", counting)
    tpl = Task([5, 6], task_id="_tpl_inline")
    tpl.history, tpl.pending, tpl.current_token = [1, 2, 3], [], 4
    tpl.state = State(torch.zeros(2, 2, 1, 8), torch.ones(2, 1, 1, 4, 4))

    def start() -> list:
        tasks = make_tasks([9], 2, {"max_tokens": 1}, None)
        asyncio.run(prefix.prepare_tasks(None, tpl, tasks))
        return [(t.history, t.pending, t.state, t.cache_origin) for t in tasks]

    first = start()
    assert threads == ["start_all"]
    assert start() == first and threads == ["start_all"]  # inline, the same tasks
    assert first[0][:3] == ([1, 2, 3], [4, 9], tpl.state)
    assert first[0][3].startswith("state:") and first[0][3].endswith(":3")
    tpl.state = State(torch.zeros(2, 2, 1, 8), torch.full((2, 1, 1, 4, 4), 2.0))
    again = start()
    assert threads == ["start_all"] * 2 and again[0][2] is tpl.state

    class Manager:
        def held_template(self, tid):
            return tpl if tid == "_tpl_inline" else None

        def get_task(self, tid):
            return None

    class Runtime:
        manager, loader = Manager(), type("Loader", (), {"cfg": None})

    monkeypatch.setattr(prefix, "loader_mismatch", lambda *a, **k: None)  # (fits the model)
    threads.clear()
    assert asyncio.run(prefix.find_template(Runtime, "rwkv-7:_tpl_inline")) is tpl
    assert threads == []
    with pytest.raises(prefix.OpenAIError):  # not held: read in a thread, and unknown
        asyncio.run(prefix.find_template(Runtime, "rwkv-7:_other"))
    assert threads == ["get_task"]


# ---- from session 52's mutation testing: behaviour no test pinned down ------------------------
def test_a_stream_from_inside_a_character_shows_it_whole():
    """GET /stream?pos=k where token k lies inside a character (the round's tokens before k
    hold its first bytes): the stream starts with that character, completed (round_lead reads
    the round's tokens before pos too)."""
    import asyncio

    from server.api.bridge import follow
    from server.model.tokenizer import Tokenizer
    from server.task.task import Status

    tok = Tokenizer()
    ids = tok.encode("ab\U0001F600cd")
    def whole(i: int) -> bool:  # the first i tokens' bytes end on a character's end
        data = tok.decode_bytes(ids[:i])
        return data.decode("utf-8", "ignore").encode() == data
    k = next(i for i in range(1, len(ids)) if not whole(i))
    assert 0 < k < len(ids)

    async def main():
        task = Task(task_id="TASK_b")
        task.status = Status.RUNNING
        task._append_output(ids)
        task._finish("length")
        return [c async for c in follow(task, tok, k, goes_on=True)]
    text = "".join(c.text for c in asyncio.run(main()))
    assert text == "\U0001F600cd"
