"""``python -m server.bench score`` on the CPU: a row per length, the scoring job's time beside
a prefill's."""

from server.bench import score


def test_score_bench_prints_a_row_per_length(capsys):
    score.main(["--preset", "tiny", "--device", "cpu", "--dtype", "fp32", "--tokens", "20,40",
                "--repeat", "1", "--chunk", "16"])
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith(("| 20 |", "| 40 |"))]
    assert len(rows) == 2 and "| tokens | score ms |" in out
    assert "passes of 16 tokens, top 1" in out
