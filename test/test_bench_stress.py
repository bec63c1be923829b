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


def test_the_scheduler_thread_has_ended_when_the_report_is_out(monkeypatch, capsys):
    """The report waits for the thread running the scheduler (``test_the_readmes_command_
    exits_cleanly``: the process aborted when it was still inside torch at exit). Its ``run``
    made slow to return after the last task, the thread must still be joined."""
    import threading
    import time

    from server.scheduler import DynamicScheduler

    real = DynamicScheduler.run

    def slow_to_return(self, *a, **k):
        out = real(self, *a, **k)
        time.sleep(0.5)
        return out

    monkeypatch.setattr(DynamicScheduler, "run", slow_to_return)
    stress.main(["--preset", "tiny", "--device", "cpu", "--tasks", "2", "--max-tokens", "4",
                 "--buffer-size", "4", "--max-batch-size", "2"])
    assert "output tokens:" in capsys.readouterr().out
    assert not [t for t in threading.enumerate() if t.name == "stress-run"]


def test_the_readmes_command_exits_cleanly():
    """As a process (the README's command): it exited with SIGABRT after its report while its
    scheduler thread was still inside torch ("terminate called without an active exception";
    session 23's QA): the thread is joined before the report."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-m", "server.bench.stress", "--preset", "tiny",
                        "--device", "cpu", "--tasks", "8", "--max-tokens", "16"], cwd=root,
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                       text=True, timeout=240)
    assert p.returncode == 0 and "output tokens:" in p.stdout, (p.returncode, p.stderr[-2000:])
