"""The prefill bench's scheduler case step by step (``--detail``): each step's time and its
prefill and pulse calls, and the copy-back of the finished tasks, on a tiny CPU model."""

from server.bench import common
from server.bench.prefill import scheduler_case


def test_scheduler_case_detail_times_each_step():
    model = common.build_model("tiny", "cpu", "fp32", "fp32")
    r = scheduler_case(model, 3, 40, detail=True)
    assert r["got"] == 3
    lines = r["detail"].splitlines()
    assert lines[0] == "| step | ms | prefill call | pulse call | rest |"
    rows = [[float(x) for x in line.strip("|").split("|")] for line in lines[2:-1]]
    assert rows and all(step > 0 for _, step, *_ in rows)
    assert sum(r[2] for r in rows) > 0 and sum(r[3] for r in rows) > 0  # prefill, pulse
    for _, step, pre, pulse, rest in rows:
        assert abs(step - pre - pulse - rest) < 0.2  # (rounding of the printed figures)
    assert lines[-1].startswith("copy-back thread: 3 tasks")  # the timed tasks, not the warm-up


def test_of_flop_counts_the_head_only_where_it_runs(monkeypatch, capsys):
    """The "of FLOP" column counts the FLOPs the pass does: the engine's prefill keeps no
    logits (the head never runs in it), the scheduler's runs the head once a prompt. It counted
    the head for every prompt token (2.9B: 6.4 % over; the tiny model's head is most of it).
    Tiny by hand: layers' matmul parameters 466,944 (12·128² a layer, LoRA 32/32/32/64, no
    value LoRA in layer 0), head 65,536·128, WKV 9·64² a head, 2 layers of 2 heads."""
    from server.bench import prefill

    per_token = 2 * 466_944 + 9 * 64 * 64 * 2 * 2
    head = 2 * 65_536 * 128
    monkeypatch.setattr(common, "MATMUL_FLOPS", 1e9)  # (the fractions readable at this size)
    mem = dict(alloc=0.0, peak=0.0, reserved=0.0)
    monkeypatch.setattr(prefill, "engine_case", lambda model, n, length, repeat: dict(
        cold=(1.0, 1.0), t_pre=1.0, ttft=1.0, tokens=n * (length - 1), mem=mem))
    monkeypatch.setattr(prefill, "scheduler_case", lambda model, n, length, **kw: dict(
        wall=1.0, ttft_mean=1.0, ttft_max=1.0, tokens=n * length, got=n, detail="",
        captures=[], chunk=512))
    prefill.main(["--preset", "tiny", "--device", "cpu", "--dtype", "fp32", "--cases", "2x64"])
    table = capsys.readouterr().out.split("| prompts |")[1]
    engine, sched = (line.split(" | ")[6] for line in table.splitlines()[2:4])
    assert engine == f"{2 * 63 * per_token / 1e9:.0%}"  # 14%
    assert sched == f"{(2 * 64 * per_token + 2 * head) / 1e9:.0%}"  # 17%
