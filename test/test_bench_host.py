"""``python -m server.bench host`` on the CPU: its rows, an exact reusing encode (the bench
asserts equal ids), and op counts split between the model and the rest of a pulse step."""

import pytest

from server.bench import host


def test_host_bench_rows(capsys):
    host.main(["--turns", "3", "--target", "600", "--repeat", "1", "--steps", "4"])
    first, prefix, second = capsys.readouterr().out.split("\n\n")
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in first.splitlines() if line.startswith("| ")}
    counts = [float(v) for k, v in rows.items() if "ops" in k or "model" in k]
    assert len(rows) == 1 + 5 and len(counts) == 3
    every, in_model, outside = counts
    assert in_model > 0 and outside > 0 and every == pytest.approx(in_model + outside, abs=0.11)
    # the prefix cache's host work: three prompt lengths, every time measured
    timed = [[float(c) for c in line.split("|")[1:5]] for line in prefix.splitlines()
             if line.startswith("| ") and "---" not in line and "tokens" not in line]
    assert [int(r[0]) for r in timed] == [2000, 32768, 131072]
    assert all(v > 0 for r in timed for v in r[1:])
    # a request's ops: load, prefill (outside the model), start, first pulse, all
    req = {line.split("|")[1].strip(): [int(c) for c in line.split("|")[2:7]]
           for line in second.splitlines() if line.startswith("| ") and "ops" not in line
           and "---" not in line}
    assert set(req) == {"greedy", "sampled"}
    for parts in req.values():
        assert all(n > 0 for n in parts) and sum(parts[:4]) == parts[4]
    assert req["greedy"][3] < req["sampled"][3]  # a sampled first token draws: more ops


def test_registered_in_the_bench_command():
    from server.bench.__main__ import BENCHES

    assert "host" in BENCHES
