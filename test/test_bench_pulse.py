"""``python -m server.bench pulse`` on the CPU with the tiny preset: both ways run and print."""

from server.bench import pulse


def test_pulse_bench_prints_both_ways(capsys):
    pulse.main(["--preset", "tiny", "--device", "cpu", "--dtype", "fp32", "--prompt", "40",
                "--repeat", "2"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| merged")
            or line.startswith("| decode step")]
    assert len(rows) == 2 and all(float(r.split("|")[2]) > 0 for r in rows)
