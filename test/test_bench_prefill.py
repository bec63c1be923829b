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
