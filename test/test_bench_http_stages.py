"""``python -m server.bench.http_stages`` on the CPU (tiny random weights, 2 turns): the chat
bench runs against an in-process server and every request gets its server-side timestamps, in
order (body parsed <= tokenised <= tasks prepared <= add_task <= first token <= text sent)."""

from server.bench import http_stages


def test_stages_of_each_request_in_order(capsys):
    http_stages.main(["--turns", "2"])
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and not ln.startswith("| turn")]
    assert len(rows) == 4  # two turns, each sent twice
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        times = [float(c) for c in cells[2:]]
        assert len(times) == 6 and times == sorted(times) and times[0] > 0, row
    assert [r.split("|")[2].strip() for r in rows] == ["turn", "again", "turn", "again"]
