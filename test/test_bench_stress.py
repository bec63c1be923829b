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


def test_a_deadline_during_arrivals_stops_submitting(capsys):
    """With --arrivals-per-s, a --deadline that comes before every task has arrived ends the
    submissions there, and the report says how many were submitted."""
    import time

    t0 = time.perf_counter()
    stress.main(["--preset", "tiny", "--device", "cpu", "--tasks", "6", "--max-tokens", "4",
                 "--arrivals-per-s", "1", "--deadline", "1.5", "--warmup", "0"])
    out = capsys.readouterr().out
    assert time.perf_counter() - t0 < 5  # not the 5+ s that six arrivals a second apart take
    assert re.search(r"STOPPED at the --deadline of 1.5 s: unfinished tasks were stopped "
                     r"\(2 of 6 submitted\)", out), out
