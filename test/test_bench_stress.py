"""The seed's stress test (``server.bench.stress``) on the CPU with the tiny preset: every task
generates its tokens whether they are submitted at once or as a stream of arrivals, and the
report counts them."""

import re

import pytest

from server.bench import stress


@pytest.mark.parametrize("arrivals", ["0", "40"])
def test_stress_report_counts_every_task(arrivals, capsys):
    stress.main(["--preset", "tiny", "--device", "cpu", "--tasks", "6", "--max-tokens", "8",
                 "--buffer-size", "4", "--max-batch-size", "4", "--arrivals-per-s", arrivals])
    out = capsys.readouterr().out
    assert "output tokens:         48" in out and "average output per task: 8 tokens" in out
    pulses = re.search(r"pulses: (\d+), ([\d.]+) steps each on average", out)
    assert pulses and 1 <= float(pulses.group(2)) <= 4, out
    assert "STOPPED" not in out
