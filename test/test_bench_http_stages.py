"""``python -m server.bench.http_stages`` on the CPU (tiny random weights, 2 turns): the chat
bench runs against an in-process server and every request gets its server-side timestamps, in
order (body parsed <= tokenised <= tasks prepared <= add_task <= first token <= text sent);
``--loop-trace`` lists the event loop's callbacks around the last two requests."""

from server.bench import http_stages


def test_stages_of_each_request_in_order(capsys):
    http_stages.main(["--turns", "2", "--loop-trace"])
    out, *loops = capsys.readouterr().out.split("\nrequest ")
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and not ln.startswith("| turn")]
    assert len(rows) == 4  # two turns, each sent twice
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        times = [float(c) for c in cells[2:]]
        assert len(times) == 6 and times == sorted(times) and times[0] > 0, row
    assert [r.split("|")[2].strip() for r in rows] == ["turn", "again", "turn", "again"]
    assert [lp.split(":")[0] for lp in loops] == ["3", "4"]
    for lp in loops:  # the handler ran on the loop before its add_task (what runs after it,
        # and when, depends on the machine: on the CPU the first token may come first)
        starts = [float(ln.split("|")[1]) for ln in lp.splitlines() if "run_asgi" in ln]
        assert starts and min(starts) < 0, lp
