"""Multi-turn chat over HTTP, prefix cache on vs off: time to first token of every turn.

    python -m server.bench.chat --demo 0.1b                 # random 0.1B weights, two servers
    python -m server.bench.chat --model path/to/rwkv7.pth --turns 10 --target 2000
    python -m server.bench.chat --url-on http://a:8000 --url-off http://b:8000   # running servers

Two servers with the same weights are started (``python run.py``: ``RWKV_STATE_CACHE_MB`` as
given, and 0); device and other settings come from the environment (``RWKV_*``). A conversation
of ``--turns`` turns whose prompt grows to about ``--target`` tokens (system prompt + user
messages, plus each reply) is sent to both, turn by turn: ``/v1/chat/completions``, streaming,
greedy, direct answers. Time to first token (TTFT) = request sent -> first SSE chunk carrying
text (the first pulse's tokens; ``RWKV_BUFFER_SIZE`` tokens per pulse). Replies must be equal.
Each row: prompt tokens, tokens the cached server actually prefilled before the first token
and in how many prefill calls (``/health``: one a turn unless a checkpoint stops the feed),
the prompt tokens it computed again after the first token (``again``: turn boundaries its
passes did not hand out), TTFT on/off, and the time from the first text chunk to the next
(``next``: the second pulse, and any work the scheduler does between them) on/off.

``--think``: a user's reading and typing time between turns: each turn is sent once the cached
server has computed the previous reply's history for it (``wait_warm``), so every turn feeds
only its new message. Without it the turns follow each other at once, and in every second one
(the cached server answering two turns in a row: ``run_chat``'s ``flip``) the request comes
before that work has begun (50 ms after the reply) and feeds the reply again (session 58).

``--template``: the system prompt is made a state template on each server first (a Task API
``create`` with ``max_tokens: 0``, then ``as_template``), and the conversation names it
(``"model": "rwkv-7:_TMPL_…"``) instead of sending the system message: the prefix cache then
resumes the turns from the template's state (prompt tokens count the template's too).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from server.bench.conversation import Conversation
from server.bench.raw_client import RawClient

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(source: list[str], env: dict, log: Path) -> tuple[subprocess.Popen, str]:
    """``run.py`` with ``source`` (``["--model", path]`` or ``["--demo", preset]``)."""
    port = free_port()
    cmd = [sys.executable, "run.py", *source, "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_until_served(url, proc, log)
    return proc, url


def wait_until_served(url: str, proc: subprocess.Popen | None = None, log: Path | None = None,
                      seconds: float = 300) -> None:
    """Return once ``url`` answers ``/health``; SystemExit if ``proc`` (when given) exits first
    or ``seconds`` pass (``log``: where its output went, for the message)."""
    see = f"; see {log}" if log else ""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"server exited ({proc.returncode}){see}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    if proc is not None:
        proc.kill()
    raise SystemExit(f"server did not start in {seconds:.0f} s{see}")


def check_reachable(option: str, url: str) -> None:
    """Exit with one line naming ``option`` when no RWKV-Server answers ``url``/health."""
    try:
        httpx.get(url.rstrip("/") + "/health", timeout=10).raise_for_status()
    except (httpx.HTTPError, ValueError) as e:
        sys.exit(f"python -m server.bench.chat: {option} {url}: no server answers there "
                 f"({type(e).__name__}: {e})")


@contextlib.contextmanager
def _sse_lines(client: httpx.Client | RawClient, body: dict):
    """The lines of a streamed chat reply from either client."""
    if isinstance(client, RawClient):
        yield client.lines("POST", "/v1/chat/completions", body)
        return
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        yield r.iter_lines()


def ask(client: httpx.Client | RawClient, messages: list, max_tokens: int,
        model: str = "rwkv-7") -> tuple[float, float, str]:
    """``(seconds to the first text chunk, seconds from it to the next one, reply)`` of one
    streamed, greedy chat request (the second figure NaN when no second text chunk came)."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True,
            "temperature": 0, "reasoning_effort": "none"}
    t0, first, second, parts = time.perf_counter(), None, None, []
    with _sse_lines(client, body) as lines:
        for line in lines:
            if not line.startswith("data: {"):
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            delta, done = choices[0].get("delta", {}), choices[0].get("finish_reason")
            text = delta.get("content") or delta.get("reasoning_content") or ""
            if first is not None and second is None and text:
                second = time.perf_counter() - t0 - first
            if first is None and (text or done):
                first = time.perf_counter() - t0
            parts.append(delta.get("content") or "")
    first = first if first is not None else time.perf_counter() - t0
    return first, float("nan") if second is None else second, "".join(parts)


def _cache_health(client: httpx.Client | RawClient) -> dict:
    health = client.get_json("/health") if isinstance(client, RawClient) else \
        client.get("/health").json()
    return health["prefix_cache"]


def prefilled(client: httpx.Client | RawClient) -> tuple[int, int, int]:
    """(prompt tokens prefill computed, its model calls, tokens computed again after first
    tokens) so far, from ``/health``."""
    cache = _cache_health(client)
    return (cache.get("prefilled_tokens", 0), cache.get("prefill_calls", 0),
            cache.get("later_tokens", 0))


def warm_counts(client: httpx.Client | RawClient) -> tuple[int, int]:
    """The cached server's next-turn work so far, from ``/health``: (``warm_tokens``: tokens
    of chat histories computed after their reply, ``warm_dropped``: histories whose next turn
    came first)."""
    cache = _cache_health(client)
    return cache.get("warm_tokens", 0), cache.get("warm_dropped", 0)


def wait_warm(client: httpx.Client | RawClient, before: tuple[int, int],
              timeout: float = 2.0, poll: float = 0.005) -> bool:
    """``--think``: return once the cached server has done the next-turn work of the reply
    just read (``warm_counts`` moved past ``before``, read as the reply ended), as a user's
    reading and typing time allows it to; False after ``timeout`` s (no job: e.g. a history
    the cache already holds)."""
    end = time.perf_counter() + timeout
    while warm_counts(client) == before:
        if time.perf_counter() > end:
            return False
        time.sleep(poll)
    return True


def template_prompt(messages: list) -> str:
    """The system message ``messages[0]`` as the chat prompt renders it."""
    from server.api.chat import build_chat_prompt

    return build_chat_prompt(messages[:1], think=False).rsplit("Assistant:", 1)[0]


def make_template(url: str, messages: list) -> str:
    """The system message ``messages[0]`` as a state template on the server at ``url``; returns
    the model name that starts from it (``rwkv-7:_TMPL_…``)."""
    prompt = template_prompt(messages)
    with httpx.Client(base_url=url, timeout=600) as c:
        made = c.post("/v1/tasks/create", json={"prompt": prompt, "max_tokens": 0})
        made.raise_for_status()
        tpl = c.post(f"/v1/tasks/{made.json()['task_id']}/as_template")
        tpl.raise_for_status()
        return f"rwkv-7:{tpl.json()['task_id']}"


def run_chat(on: httpx.Client, off: httpx.Client, tokenizer, args,
             system: str = "You are a helpful assistant. ", flip: bool = False,
             urls: tuple[str, str] | None = None) -> list[dict]:
    """One conversation, each turn sent to both servers; ``flip``: the cache-off server first
    at odd turns (else at even ones), so that neither is always the one whose request comes
    after the other's reply was read. ``urls`` (the servers', with ``args.template``): the
    system message goes into a template on each (``make_template``), the turns name it."""
    from server.api.chat import build_chat_prompt

    chat = Conversation(tokenizer, args.turns, args.target, args.max_tokens, system)
    models, skip, head = ("rwkv-7", "rwkv-7"), 0, 0
    if getattr(args, "template", False):
        models, skip = tuple(make_template(u, chat.messages) for u in urls), 1
        head = len(tokenizer.encode(template_prompt(chat.messages)))
    rows, warm = [], None
    think = getattr(args, "think", False)
    for turn in range(args.turns):
        messages = chat.ask(turn)[skip:]
        n_prompt = head + len(tokenizer.encode(build_chat_prompt(messages, think=False)))
        if warm is not None and not wait_warm(on, warm):
            rows[-1]["warm_waited_out"] = True
        before = prefilled(on)
        if flip != (turn % 2 == 1):
            ttft_off, next_off, reply_off = ask(off, messages, args.max_tokens, models[1])
        ttft_on, next_on, reply = ask(on, messages, args.max_tokens, models[0])
        # (read at once: the reply's next-turn job starts 50 ms after it, and the wait must see
        # that job move the counts, not an earlier one's)
        warm = warm_counts(on) if think else None
        fed, calls, again = (a - b for a, b in zip(prefilled(on), before))
        if flip == (turn % 2 == 1):
            ttft_off, next_off, reply_off = ask(off, messages, args.max_tokens, models[1])
        rows.append({"turn": turn + 1, "prompt_tokens": n_prompt, "prefilled_on": fed,
                     "calls_on": calls, "again_on": again,
                     "ttft_on_s": ttft_on, "ttft_off_s": ttft_off, "next_on_s": next_on,
                     "next_off_s": next_off, "equal": reply == reply_off})
        print(row_line(rows[-1]), flush=True)
        chat.reply(reply)
    if warm is not None and not wait_warm(on, warm):  # (the last reply's job too: run during
        rows[-1]["warm_waited_out"] = True  # the next conversation, it ended a wait there early)
    return rows


HEADER = ("turn  prompt  prefilled  calls  again  TTFT on ms  TTFT off ms   ratio  "
          "next on ms  next off ms  equal")


def row_line(r: dict) -> str:
    return (f"{r['turn']:>4} {r['prompt_tokens']:>7} {r['prefilled_on']:>9} {r['calls_on']:>6} "
            f"{r.get('again_on', 0):>6} {r['ttft_on_s'] * 1000:>10.1f} "
            f"{r['ttft_off_s'] * 1000:>11.1f} {r['ttft_off_s'] / r['ttft_on_s']:>7.1f}x "
            f"{r.get('next_on_s', float('nan')) * 1000:>11.1f} "
            f"{r.get('next_off_s', float('nan')) * 1000:>12.1f} {str(r['equal']):>6}")


def median_rows(runs: list[list[dict]]) -> list[dict]:
    """Per turn: the median TTFT of each server over the runs (prompt sizes of the first run;
    replies equal in every run)."""
    rows = []
    for turn in zip(*runs):
        row = dict(turn[0])
        for key in ("ttft_on_s", "ttft_off_s", "next_on_s", "next_off_s"):
            if key in row:
                row[key] = sorted(r[key] for r in turn)[len(turn) // 2]
        row["equal"] = all(r["equal"] for r in turn)
        rows.append(row)
    return rows


def pooled(runs: list[list[dict]], first_turn: int = 2, measure: str = "ttft") -> str:
    """One line per server: the median and quartiles of every turn's TTFT (``measure``
    "next": the time from the first text chunk to the next) from ``first_turn`` on, over all
    conversations. The cached turns prefill about the same number of tokens, so their pooled
    median is a steadier measure for comparing builds than one turn's median (the uncached
    figures grow with the prompt; given for completeness)."""
    def line(key: str) -> str:
        xs = sorted(r[key] * 1e3 for run in runs for r in run
                    if r["turn"] >= first_turn and r.get(key) == r.get(key))  # (not NaN)
        if not xs:
            return "no turns"
        q = [xs[min(len(xs) - 1, int(f * len(xs)))] for f in (0.25, 0.5, 0.75)]
        return f"median {q[1]:.1f} ms (quartiles {q[0]:.1f}-{q[2]:.1f}, {len(xs)} turns)"

    what = "" if measure == "ttft" else "next text chunk, "
    return (f"{what}turns {first_turn}+ of all conversations: cache on "
            f"{line(measure + '_on_s')}; cache off {line(measure + '_off_s')}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m server.bench.chat", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="RWKV-7 checkpoint (default: the servers' random weights of "
                    "--demo, the same in both)")
    ap.add_argument("--demo", default="0.1b", help="random-weights preset when no --model")
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--target", type=int, default=2000, help="prompt tokens at the last turn")
    ap.add_argument("--max-tokens", type=int, default=32, help="reply length")
    ap.add_argument("--cache-mb", type=int, default=1024, help="RWKV_STATE_CACHE_MB when on")
    ap.add_argument("--buffer-size", type=int, help="RWKV_BUFFER_SIZE of both servers (decode "
                    "steps per pulse: the first text arrives after one pulse)")
    ap.add_argument("--url-on", help="a running server with the cache (skips starting one)")
    ap.add_argument("--url-off", help="a running server without the cache")
    ap.add_argument("--repeat", type=int, default=1,
                    help="conversations (each with its own system prompt); with more than one, "
                         "a last table of each turn's median TTFT")
    ap.add_argument("--client", choices=("httpx", "raw"), default="httpx",
                    help="httpx (the openai SDK's client) or a minimal socket client "
                         "(server.bench.raw_client: TTFT without the client's own Python work)")
    ap.add_argument("--template", action="store_true",
                    help="the system prompt as a state template the turns name (rwkv-7:_TMPL_…)")
    ap.add_argument("--think", action="store_true",
                    help="a user's reading and typing time: each turn is sent once the cached "
                         "server has computed the reply's history for it (its warm-up job, "
                         "RWKV_CHAT_WARM_NEXT_TURN, from 50 ms after the reply; /health's "
                         "warm_tokens; 2 s at most). Without it the next turn is sent at once, "
                         "and where the cached server answers two turns in a row the turn "
                         "comes before that job and feeds the reply again")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    from server.model.tokenizer import Tokenizer

    tmp = Path(tempfile.mkdtemp(prefix="rwkv-bench-chat-"))
    procs = []
    # both servers make the same random weights (the demo's: seeded, on the serving device)
    source = ["--model", args.model] if args.model else ["--demo", args.demo]
    try:
        urls = []
        for name, url, mb in (("on", args.url_on, args.cache_mb), ("off", args.url_off, 0)):
            if url is None:
                env = {"RWKV_STATE_CACHE_MB": str(mb), "RWKV_TASK_DB_PATH": str(tmp / f"{name}.db")}
                if args.buffer_size:
                    env["RWKV_BUFFER_SIZE"] = str(args.buffer_size)
                proc, url = start_server(source, env, tmp / f"{name}.log")
                procs.append(proc)
            else:
                check_reachable(f"--url-{name}", url)
            urls.append(url)
        client = RawClient if args.client == "raw" else httpx.Client
        with client(base_url=urls[0], timeout=600) as on, \
                client(base_url=urls[1], timeout=600) as off:
            model = httpx.get(urls[0] + "/health").json()["model"]
            print(f"model: {model}  max_tokens/turn: {args.max_tokens}  buffer size: "
                  f"{args.buffer_size or 'server default'}  client: {args.client}"
                  f"{'  system prompt: a template' if args.template else ''}"
                  f"{'  think time: each turn after the reply is warmed' if args.think else ''}"
                  f"\n{HEADER}")
            runs = []
            for i in range(args.repeat):
                system = "You are a helpful assistant. " if i == 0 else \
                    f"You are helpful assistant number {i}. "
                runs.append(run_chat(on, off, Tokenizer(), args, system, flip=i % 2 == 1,
                                     urls=tuple(urls)))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
    rows = runs[0] if len(runs) == 1 else median_rows(runs)
    if len(runs) > 1:
        print(f"median of {len(runs)} conversations\n{HEADER}")
        for r in rows:
            print(row_line(r))
    print(pooled(runs))
    print(pooled(runs, measure="next"))
    if args.think:
        out = sum(bool(r.get("warm_waited_out")) for run in runs for r in run)
        print(f"--think: {out} of {sum(len(run) for run in runs)} waits for a reply's "
              "next-turn work ran out (2 s)")
    last = rows[-1]
    print(f"last turn: {last['prompt_tokens']} prompt tokens, {last['prefilled_on']} prefilled "
          f"with the cache; TTFT {last['ttft_on_s'] * 1000:.1f} ms vs "
          f"{last['ttft_off_s'] * 1000:.1f} ms "
          f"({last['ttft_off_s'] / last['ttft_on_s']:.1f}x); all replies equal: "
          f"{all(r['equal'] for r in rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
