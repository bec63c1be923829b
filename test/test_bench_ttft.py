"""``python -m server.bench ttft`` on the CPU with the tiny preset: the table's columns, equal
replies with and without the cache, only the new messages prefilled, a breakdown that sums up."""

import pytest

from server.bench import ttft
from server.model.wkv import SUB  # the CPU's WKV chunk: where states are kept and resumed
from server.scheduler.base import PREFILL_CHUNK

ARGS = ["--preset", "tiny", "--device", "cpu", "--dtype", "fp32", "--turns", "3",
        "--target", "600", "--max-tokens", "4", "--repeat", "1", "--warmup", "0"]


@pytest.fixture(scope="module")
def rows():
    return ttft.run(ttft.parse_args(ARGS))


def test_rows_cache_vs_no_cache(rows):
    assert [r["turn"] for r in rows] == [1, 2, 3]
    assert all(r["equal"] for r in rows)  # fp32 on the CPU: the cache changes no token
    prompts = [r["prompt"] for r in rows]
    assert prompts == sorted(prompts) and prompts[-1] > 400
    # every prompt token, its last too (the first token is sampled from the prefill pass)
    assert rows[0]["cache"]["prefilled"] == rows[0]["nocache"]["prefilled"] == prompts[0]
    # one call too, which hands out its boundaries (the end of the system prompt, the last):
    # nothing is computed twice
    assert rows[0]["cache"]["rounds"] == 1 and rows[0]["cache"]["later"] == 0
    for prev, r in zip(rows, rows[1:]):  # later turns: from the end of the previous reply
        assert r["nocache"]["prefilled"] == r["prompt"]
        new = r["prompt"] - prev["prompt"]
        # the previous reply as re-sent, computed after it (from its prompt's last boundary;
        # nothing when both fall in one WKV chunk: the next turn resumes where it would)
        assert prev["warmed"]["nocache"] == 0 and 0 <= prev["warmed"]["cache"] < new
        # (resumed at a multiple of the WKV chunk: split invariance, the default)
        resumed = prev["next_prefix"] - prev["next_prefix"] % SUB
        assert r["cache"]["prefilled"] == r["prompt"] - resumed < new + 16 + SUB
        # one call before the first token, which hands out this turn's last boundary too:
        # nothing is computed twice
        # (without the cache, one a step's budget: 512 tokens on the CPU)
        assert r["cache"]["rounds"] == 1
        assert r["nocache"]["rounds"] == -(-r["prompt"] // PREFILL_CHUNK["cpu"])
        assert r["cache"]["later"] == 0
        assert r["nocache"]["later"] == 0
    for r in rows:
        for name in ("cache", "nocache"):
            t = r[name]
            parts = sum(t[k] for k in ttft.STAGES)
            assert t["ttft"] > 0 and parts == pytest.approx(t["ttft"], rel=1e-6)
            assert t["prefill_model"] > 0 and t["first_pulse"] > 0 and t["queue"] >= 0


def test_table_columns(rows, capsys):
    text = ttft.tables(rows)
    main, parts = text.split("Where the TTFT went")
    assert main.splitlines()[0] == ("| turn | prompt tokens | prefilled (cache) | rounds (cache) "
                                    "| later (cache) | after reply (cache) | TTFT cache ms "
                                    "| TTFT no cache ms | ratio | equal |")
    assert len([ln for ln in main.splitlines() if ln.startswith("| ")]) == 1 + 3
    header = [ln for ln in parts.splitlines() if ln.startswith("| turn")][0]
    assert header == ("| turn | scheduler | queue | prefill model | prefill other | first pulse "
                      "| hand-over | TTFT |")
    assert len([ln for ln in parts.splitlines() if ln.startswith("| ")]) == 1 + 2 * 3


def test_registered_in_the_bench_command():
    from server.bench.__main__ import BENCHES

    assert "ttft" in BENCHES


def test_stages_time_each_method_once_and_put_them_back():
    """timed_stages on a real scheduler: one request's prefill-phase methods are counted once
    each (the pulses as many times as they ran), and afterwards every method is the class's
    again (or the instance's own wrapper, as the ttft probe's engine.prefill)."""
    from server.bench import common, stages
    from server.scheduler import DynamicScheduler
    from server.scheduler.prefix_cache import PrefixCache
    from server.task.task import Task

    model = common.build_model("tiny", "cpu", "fp32", "fp32")
    loader = common.BenchLoader(model, "random-tiny")
    sched = DynamicScheduler(loader, max_batch_size=4, buffer_size=4,
                             prefix_cache=PrefixCache(64 << 20, "cpu"))
    own = sched.engine.prefill = lambda *a, _real=sched.engine.prefill: _real(*a)
    times: dict = {}
    task = Task(list(range(5, 60)), max_tokens=3, temperature=0.0)
    task.cache_origin = ""
    with stages.timed_stages(sched, times):
        sched.add_task(task)
        sched.run()
    assert task.status.name == "FINISHED" and len(task.get_all_tokens()) == 3
    assert times["engine.load"][0] == times["prefiller._seq"][0] == 1
    assert times["engine.prefill"][0] == 1 and times["engine.pulse"][0] >= 2
    assert sched.engine.prefill is own and "load" not in vars(sched.engine)
    assert "_jump" not in vars(sched.prefiller) and "lookup" not in vars(sched.prefiller.cache)
    report = stages.report(times)
    assert report.splitlines()[0] == "| method | calls | ms |" and "| engine.load | 1 |" in report


def test_profiled_first_step_profiles_one_step_on_the_scheduler_thread():
    """profiled_first_step: the step that admits a request runs under torch.profiler on the
    scheduler's daemon thread (its torch ops in the table), later steps do not, and the
    scheduler's own step is back afterwards."""
    from server.bench import common, stages
    from server.scheduler import DynamicScheduler
    from server.task.task import Task

    model = common.build_model("tiny", "cpu", "fp32", "fp32")
    sched = DynamicScheduler(common.BenchLoader(model, "random-tiny"), max_batch_size=2,
                             buffer_size=2)
    sched.start_daemon()
    try:
        out: dict = {}
        task = Task(list(range(5, 40)), max_tokens=5, temperature=0.0)
        with stages.profiled_first_step(sched, out):
            sched.add_task(task)
            sched.run()
        assert task.status.name == "FINISHED" and len(task.get_all_tokens()) == 5
        table = out["table"]
        assert "aten::" in table and "step wall" in table and "Self CPU" in table
        assert "step" not in vars(sched)
    finally:
        sched.shutdown()


def test_timeline_places_one_request_s_calls_in_order_and_puts_them_back():
    """timeline on a real scheduler (CPU: no device times): the request's calls in the order
    they ran, nested ones inside their caller's span, the report cut at the first token; the
    methods are the scheduler's own again afterwards."""
    from server.bench import common, stages
    from server.scheduler import DynamicScheduler
    from server.scheduler.prefix_cache import PrefixCache
    from server.task.task import Task

    model = common.build_model("tiny", "cpu", "fp32", "fp32")
    sched = DynamicScheduler(common.BenchLoader(model, "random-tiny"), max_batch_size=4,
                             buffer_size=4, prefix_cache=PrefixCache(64 << 20, "cpu"))
    task = Task(list(range(5, 60)), max_tokens=3, temperature=0.0)
    task.cache_origin = ""
    records: list = []
    with stages.timeline(sched, records):
        sched.add_task(task)
        sched.run()
    assert task.status.name == "FINISHED" and len(task.get_all_tokens()) == 3
    labels = [r["label"] for r in records]
    order = ["scheduler.add_task", "engine.load", "prefiller._seq", "engine.prefill",
             "model.prefill", "engine.start", "engine.pulse"]
    assert [labels.index(x) for x in order] == sorted(labels.index(x) for x in order)
    assert all(r["device_in"] is None and r["host_in"] <= r["host_out"] for r in records)
    prefill = records[labels.index("engine.prefill")]
    inner = records[labels.index("model.prefill")]
    assert inner["depth"] == prefill["depth"] + 1
    assert prefill["host_in"] <= inner["host_in"] <= inner["host_out"] <= prefill["host_out"]
    assert "add_task" not in vars(sched) and "prefill" not in vars(sched.engine.model)
    pulse = records[labels.index("engine.pulse")]
    t0 = records[0]["host_in"]
    report = stages.timeline_report(records, pulse["host_out"] - t0)
    lines = report.splitlines()
    # the thread's CPU time in each call: never more than its wall time (clock granularity)
    assert all(0 <= r["cpu"] <= r["host_out"] - r["host_in"] + 1e-3 for r in records)
    assert records[labels.index("model.prefill")]["cpu"] > 0
    assert lines[0] == ("| call | host in | host out | thread cpu ms | device in | device out "
                        "|")
    assert lines[2].startswith("| scheduler.add_task | 0.00 |")
    assert "| · · · model.prefill |" in report and lines[-2].startswith("| first token")
    assert lines[-1].endswith("later calls not shown)")  # the second and third pulses


@pytest.mark.parametrize("flag,synced", [("1", True), ("0", False)])
def test_sync_prefill_flag(monkeypatch, flag, synced):
    """--sync-prefill 0 runs the prefill calls as a server does (no synchronisation around
    them); the breakdown still sums to the TTFT."""
    from server.bench import common

    calls = []
    real = common.timed
    monkeypatch.setattr(common, "timed", lambda fn, dev: calls.append(1) or real(fn, dev))
    args = ARGS[:ARGS.index("--turns")] + ["--turns", "1", "--target", "200", "--max-tokens",
                                           "2", "--repeat", "1", "--warmup", "0",
                                           "--sync-prefill", flag]
    (row,) = ttft.run(ttft.parse_args(args))
    assert bool(calls) == synced
    t = row["cache"]
    assert t["prefill_model"] > 0 and sum(t[k] for k in ttft.STAGES) == pytest.approx(t["ttft"])


def test_gemv_rows_option_needs_the_fused_path():
    """``--gemv-rows`` (ttft, prefill): 0 leaves the model as served; on a model without the
    fused CUDA path it stops with a message rather than timing something else."""
    from server.bench import common

    model = common.build_model("tiny", "cpu", "fp32", "fp32")
    common.apply_gemv_rows(model, 0)
    with pytest.raises(SystemExit, match="fused CUDA path"):
        common.apply_gemv_rows(model, 64)
