"""The chat benchmark's summaries (``server.bench.chat``): per-turn medians over conversations
and the pooled TTFT of the cached turns."""

from server.bench.chat import median_rows, pooled


def _run(ons: list[float], offs: list[float], equal=True) -> list[dict]:
    return [{"turn": i + 1, "prompt_tokens": 100 * (i + 1), "prefilled_on": 50, "calls_on": 1,
             "ttft_on_s": on / 1e3, "ttft_off_s": off / 1e3, "next_on_s": 2 * on / 1e3,
             "next_off_s": float("nan") if i == 2 else 3 * off / 1e3, "equal": equal}
            for i, (on, off) in enumerate(zip(ons, offs))]


def test_median_rows_takes_each_turns_median_and_ands_equality():
    runs = [_run([30, 9, 12], [30, 20, 40]), _run([31, 11, 10], [29, 22, 41], equal=False),
            _run([29, 10, 11], [31, 21, 39])]
    rows = median_rows(runs)
    assert [r["ttft_on_s"] * 1e3 for r in rows] == [30, 10, 11]
    assert [round(r["ttft_off_s"] * 1e3) for r in rows] == [30, 21, 40]
    assert not any(r["equal"] for r in rows) and rows[2]["prompt_tokens"] == 300


def test_pooled_skips_the_first_turn_and_pools_the_conversations():
    runs = [_run([30, 9, 12, 10], [30, 20, 40, 50]), _run([31, 11, 10, 13], [29, 22, 41, 52])]
    line = pooled(runs)
    # cache on, turns 2-4 of both: 9 10 10 11 12 13 -> quartiles by rank 1, 3, 4
    assert "cache on median 11.0 ms (quartiles 10.0-12.0, 6 turns)" in line
    assert "cache off median 41.0 ms" in line
    assert "no turns" in pooled(runs, first_turn=9)
    # the time to the next text chunk; a turn without one (NaN) left out
    nxt = pooled(runs, measure="next")
    assert nxt.startswith("next text chunk, ") and "cache on median 22.0 ms" in nxt
    assert "cache off median 150.0 ms (quartiles 66.0-156.0, 4 turns)" in nxt


def test_the_raw_client_reads_what_httpx_reads(server_url):
    """``--client raw``: the same greedy replies as httpx on one keep-alive socket, the cache
    counters from ``/health``, a 4xx raised with its status, and a stream left half-read
    followed by a working request (the socket is replaced)."""
    import httpx
    import pytest

    from server.bench.chat import ask, prefilled
    from server.bench.raw_client import RawClient

    messages = [{"role": "user", "content": "Name three colours."}]
    with httpx.Client(base_url=server_url, timeout=60) as h, RawClient(server_url, 60) as raw:
        want = ask(h, messages, 8)[2]
        first, _, got = ask(raw, messages, 8)
        sock = raw.sock
        assert got == want and first > 0
        assert ask(raw, messages + [{"role": "assistant", "content": got},
                                    {"role": "user", "content": "More."}], 4)[2]
        assert raw.sock is sock  # kept alive
        assert prefilled(raw) == prefilled(h)
        with pytest.raises(RuntimeError, match="422|400"):
            list(raw.request("POST", "/v1/chat/completions", {"messages": "no"}))
        lines = raw.lines("POST", "/v1/chat/completions",
                          {"messages": messages, "max_tokens": 8, "stream": True,
                           "temperature": 0, "reasoning_effort": "none"})
        next(lines)
        lines.close()  # left unread: the next request opens another socket
        assert ask(raw, messages, 8)[2] == want


def test_the_raw_client_replaces_a_socket_the_server_closed_while_idle():
    """uvicorn closes a keep-alive connection after 5 idle seconds; the raw client wrote its
    next request into that socket and failed ("the server closed the connection"), ending
    ``server.bench.chat --client raw`` wherever a turn of the other server took over 5 s
    (session 34's review). It connects again and resends."""
    import socket
    import threading

    from server.bench.raw_client import RawClient

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    served = []

    def serve():  # each connection: one request answered with keep-alive, then closed
        for _ in range(2):
            conn, _ = listener.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                served.append(data.split(b"\r\n")[0])
                body = b'{"n": %d}' % len(served)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(body) + body)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with RawClient(f"http://127.0.0.1:{port}", 10) as raw:
        assert raw.get_json("/health") == {"n": 1}
        t.join(0.5)  # (the server has closed the kept socket by now)
        assert raw.get_json("/health") == {"n": 2}
    t.join(5)
    listener.close()
    assert served == [b"GET /health HTTP/1.1"] * 2


def test_the_template_option_names_a_template_of_the_system_prompt(server_url, http,
                                                                    monkeypatch):
    """``--template``: each server gets a template of the system message (its rendering, up to
    the first user turn) and the turns name it instead of sending that message; the replies of
    two such templates of one text (here both on the shared server) are equal, and the prompt
    counts the template's tokens."""
    from argparse import Namespace

    from server.api.chat import build_chat_prompt
    from server.bench.chat import make_template, run_chat, template_prompt
    from server.model.tokenizer import Tokenizer

    system = [{"role": "system", "content": "Be brief."}]
    assert template_prompt(system) == "System: Be brief.\n\n"
    model = make_template(server_url, system)
    assert model.startswith("rwkv-7:_")
    tid = model.split(":", 1)[1]
    assert http.get(f"/v1/tasks/{tid}/status").status_code == 200
    import server.bench.chat as bench

    sent, real = [], bench.ask
    monkeypatch.setattr(bench, "ask", lambda c, messages, n, model: (
        sent.append((model, messages[0]["role"])), real(c, messages, n, model))[1])
    args = Namespace(turns=2, target=300, max_tokens=4, template=True)
    with httpx_client(server_url) as a, httpx_client(server_url) as b:
        rows = run_chat(a, b, Tokenizer(), args, "Be brief. ", urls=(server_url, server_url))
    assert [r["equal"] for r in rows] == [True, True]
    models = {m for m, _ in sent}
    assert len(sent) == 4 and len(models) == 2 and all(m.startswith("rwkv-7:_") for m in models)
    assert {role for _, role in sent} == {"user"}  # the system message is the template's
    system = [{"role": "system", "content": "Be brief. " * 20}]  # (Conversation's)
    head = len(Tokenizer().encode(template_prompt(system)))
    first = Tokenizer().encode(build_chat_prompt(bench.Conversation(
        Tokenizer(), 2, 300, 4, "Be brief. ").ask(0)[1:], think=False))
    assert rows[0]["prompt_tokens"] == head + len(first)


def httpx_client(url: str):
    import httpx

    return httpx.Client(base_url=url, timeout=60)


def test_wait_warm_returns_once_the_next_turn_work_is_counted():
    """``--think``: the wait ends when /health's ``warm_tokens`` or ``warm_dropped`` moves
    past what it was before the request, and gives up (False) after its timeout."""
    from server.bench.chat import wait_warm

    class Health:
        def __init__(self, counts):
            self.counts, self.calls = list(counts), 0

        def get(self, path):
            assert path == "/health"
            self.calls += 1
            warm, dropped = self.counts[min(self.calls - 1, len(self.counts) - 1)]
            data = {"prefix_cache": {"warm_tokens": warm, "warm_dropped": dropped}}
            return type("R", (), {"json": lambda _self: data})()

    moving = Health([(10, 0), (10, 0), (42, 0)])
    assert wait_warm(moving, (10, 0), timeout=5, poll=0) and moving.calls == 3
    dropped = Health([(10, 0), (10, 1)])
    assert wait_warm(dropped, (10, 0), timeout=5, poll=0) and dropped.calls == 2
    still = Health([(10, 0)])
    assert not wait_warm(still, (10, 0), timeout=0.05, poll=0.01) and still.calls > 1


def test_think_waits_before_each_later_turn_and_after_the_last(server_url, monkeypatch):
    """``--think``: run_chat waits for each reply's next-turn work (from the counts read as the
    reply ended) before the next turn is sent and once more after the last reply, and marks
    the turn whose wait ran out (``warm_waited_out``, counted in the summary)."""
    from argparse import Namespace

    import server.bench.chat as bench
    from server.model.tokenizer import Tokenizer

    reads, waits = iter(range(100)), []
    monkeypatch.setattr(bench, "warm_counts", lambda c: (next(reads), 0))
    monkeypatch.setattr(bench, "wait_warm", lambda c, before: waits.append(before) or
                        len(waits) != 1)  # the first wait runs out, the last does not
    args = Namespace(turns=2, target=300, max_tokens=2, think=True)
    with httpx_client(server_url) as a, httpx_client(server_url) as b:
        rows = bench.run_chat(a, b, Tokenizer(), args, "Be brief. ")
    assert waits == [(0, 0), (1, 0)]
    assert rows[0].get("warm_waited_out") is True and "warm_waited_out" not in rows[1]
    waits.clear()
    monkeypatch.setattr(bench, "wait_warm", lambda c, before: waits.append(before) and False)
    with httpx_client(server_url) as a, httpx_client(server_url) as b:
        rows = bench.run_chat(a, b, Tokenizer(), Namespace(**{**vars(args), "turns": 1}),
                              "Be brief. ")
    assert len(waits) == 1 and rows[0]["warm_waited_out"] is True  # (the last reply's)
