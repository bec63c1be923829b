"""Time to first token of a growing chat, in process: prefix cache on vs off, and where it went.

    python -m server.bench ttft --preset 0.1b                  # CUDA if present, else CPU
    python -m server.bench ttft --preset tiny --device cpu --dtype fp32 --turns 3

The chat of ``server.bench.chat`` (system prompt, ``--turns`` user messages growing the prompt
to about ``--target`` tokens, ``--max-tokens``-token greedy direct replies) is driven through two
real ``DynamicScheduler`` daemons on one model with random weights (made on the device, see
``common.build_model``): one with a ``PrefixCache`` (``--cache-mb``), one without. Tasks are the
server's chat tasks (prefix-cache origin, no state kept at the end of the reply). No HTTP: TTFT
here is the scheduler's part of a request's, from ``add_task`` to the callback with its first
token. Per turn: prompt tokens, tokens the cached scheduler prefilled before the first token and
in how many model calls (``rounds``: its prefill stops at each checkpoint), tokens it computed
again after the first token (``later``: turn boundaries kept for later requests that the
pass itself did not hand out, e.g. the first turn's system prompt end) and after the
reply (``after reply``: the history with the reply as the next turn re-sends it, computed
before that turn is sent, as a server does in a user's reading and typing time), TTFT with
and without the cache (median of ``--repeat`` conversations, each with its own system prompt,
after ``--warmup`` unmeasured ones that capture graphs and compile kernels), and whether the
replies were equal. The breakdown (ms, of the median run) sums to the TTFT:

* queue: ``add_task`` -> the task admitted into a slot (daemon wake-up, ``engine.load``);
* prefill model: ``engine.prefill`` calls (on CUDA synchronised around each, so their GPU time
  lands here and not in the pulse; the server does not wait there: ``--sync-prefill 0`` runs
  them as the server does, and TTFT is then the server's);
* prefill other: the rest of the prefill phase (cache lookups and loads, checkpoint planning,
  state copies into the cache, starting the slot);
* first pulse: ``engine.pulse`` of the pulse that produced the first token (one decode step);
* hand-over: from that pulse's end to the task's callback (bookkeeping of the pulse).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from server.model.presets import PRESETS
from server.bench import common
from server.bench.conversation import Conversation


class Probe:
    """One scheduler (cache on or off) with its ``engine.prefill`` calls timed and counted."""

    def __init__(self, model, loader, cache_mb: int, buffer_size: int, sync: bool = True):
        from server.scheduler import DynamicScheduler
        from server.scheduler.prefix_cache import PrefixCache

        dev = model.device
        cache = None
        if cache_mb > 0:
            share = 0.5 if dev.type == "cuda" else 1.0  # the server's default split
            cache = PrefixCache(cache_mb << 20, dev, device_bytes=int((cache_mb << 20) * share),
                                vocab=model.cfg.vocab_size)
        self.sched = DynamicScheduler(loader, max_batch_size=256, buffer_size=buffer_size,
                                      prefix_cache=cache)
        self.loader, self.device = loader, dev
        self.calls: list[float] = []  # seconds of each engine.prefill call
        engine = self.sched.engine
        real = engine.prefill

        def timed_prefill(slots, token_lists, first=(), mid=0):
            if sync:  # the pass's device time, at the cost of waiting for it here
                t, kept = common.timed(lambda: real(slots, token_lists, first, mid), dev)
            else:  # as a server runs it: the host goes on while the device works
                t0 = time.perf_counter()
                kept = real(slots, token_lists, first, mid)
                t = time.perf_counter() - t0
            self.calls.append(t)
            return kept

        engine.prefill = timed_prefill  # the Prefiller calls it through the engine
        self.sched.start_daemon()

    def warm(self, tokens: list[int]) -> int:
        """As the server after a chat reply: the history with the reply (``tokens``) computed
        from its cached start; returns once done (the next turn comes after a user's reading
        and typing time). Tokens computed (0 without a cache)."""
        pre = self.sched.prefiller
        before = pre.warm_tokens
        self.sched.warm_prefix("", tokens)
        while pre.warm_wait() is not None:  # the server's delay before it computes the job
            time.sleep(0.001)
        self.sched.run()
        common.sync(self.device)  # its pass done too: the next turn comes seconds later
        return pre.warm_tokens - before

    def ask(self, tokens: list[int], max_tokens: int) -> dict:
        """One greedy chat task through the daemon: its timings and output."""
        from server.task.task import Task, new_task_id

        first, done = {}, threading.Event()

        def on_tokens(_toks):
            if not first:
                first["t"] = time.perf_counter()
                first["pulse"] = self.sched.pulses[-1]["seconds"]  # appended before hand-out

        task = Task(list(tokens), task_id=new_task_id("TMP"), max_tokens=max_tokens,
                    temperature=0.0, presence_penalty=0.0, repetition_penalty=0.0,
                    collect_callback=on_tokens, finish_callback=lambda _: done.set())
        task.keep_state = False  # as the server's chat tasks
        task.cache_origin, task.cache_finish = "", False
        pre = self.sched.prefiller
        fed0, later0, self.calls = pre.prefilled_tokens, pre.later_tokens, []
        t0 = time.perf_counter()
        self.sched.add_task(task)
        if not done.wait(600):
            raise RuntimeError("the task did not finish in 600 s")
        self.sched.run()  # until deferred work (the boundary for the next turn) is done too
        t_first = first.get("t", time.perf_counter())
        model_s = sum(self.calls)
        prefill_s = task._t_gen - task._t_admit
        pulse_s = first.get("pulse", 0.0)
        return dict(ttft=t_first - t0, queue=task._t_admit - t0, prefill_model=model_s,
                    prefill_other=prefill_s - model_s, first_pulse=pulse_s,
                    handover=t_first - task._t_gen - pulse_s, rounds=len(self.calls),
                    prefilled=pre.prefilled_tokens - fed0, later=pre.later_tokens - later0,
                    output=task.round_tokens())

    def close(self) -> None:
        self.sched.shutdown()


def reply_text(loader, tokens: list[int]) -> str:
    """What the server would send (and the client re-send) as the reply's content."""
    from server.api.splitter import OutputSplitter, collect

    splitter = OutputSplitter("direct")
    pieces = splitter.feed(loader.decode(tokens)) + splitter.finish("stop")
    return collect(pieces)["content"]


def conversation(probes: dict, loader, args, system: str, flip: bool = False,
                 look=None) -> list[dict]:
    """One conversation sent turn by turn to every probe; a row per turn. The probes take turns
    going first (``flip`` swaps who starts): the first request after the device idled may pay
    for it (clocks, caches), and neither probe should always be the one that pays. ``look``:
    ``look(scheduler)`` gives a context manager the last turn's cached request runs inside
    (the bench's observers: ``traced``, stages.py's ``timed_stages``, ``profiled_first_step``,
    ``timeline``)."""
    from server.api.chat import build_chat_prompt, history_text

    chat = Conversation(loader.tokenizer, args.turns, args.target, args.max_tokens, system)
    rows = []
    for turn in range(args.turns):
        tokens = loader.encode(build_chat_prompt(chat.ask(turn), think=False))
        row = {"turn": turn + 1, "prompt": len(tokens)}
        order = list(probes.items())
        if flip != (turn % 2 == 1):
            order.reverse()
        for name, probe in order:
            if look is not None and name == "cache" and turn == args.turns - 1:
                with look(probe.sched):  # the last cached request
                    row[name] = probe.ask(tokens, args.max_tokens)
            else:
                row[name] = probe.ask(tokens, args.max_tokens)
        outs = [row[name]["output"] for name in probes]
        row["equal"] = all(o == outs[0] for o in outs)
        chat.reply(reply_text(loader, outs[0]))  # the first probe's (the cache's) reply
        if args.warm_next_turn:
            hist = loader.encode(history_text(chat.messages))
            row["warmed"] = {name: probe.warm(hist) for name, probe in probes.items()}
            row["next_prefix"] = len(hist)
        rows.append(row)
    return rows


@contextmanager
def traced(out: dict):
    """While inside, device time by kernel and copy into ``out["table"]`` (CUDA only: the
    scheduler's thread is not the one profiled, and CUDA activity is recorded for the whole
    process)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        out["table"] = "(no CUDA device: nothing traced)"
        yield out
        return
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        yield out
    out["table"] = prof.key_averages().table(sort_by="self_device_time_total", row_limit=25,
                                             max_name_column_width=70)


def observe(probes, loader, args) -> None:
    """The observers asked for, each over one more conversation (its last cached request)."""
    from server.bench import stages

    if args.trace:
        out: dict = {}
        conversation(probes, loader, args, "You are the traced assistant. ",
                     look=lambda _: traced(out))
        print(f"\n### trace of the last turn, cache on\n{out['table']}\n", flush=True)
    if args.stages:
        times: dict = {}
        rows = conversation(probes, loader, args, "You are the timed assistant. ",
                            look=lambda s: stages.timed_stages(s, times))
        breakdown = common.table(STAGE_HEADER, [stage_row(rows[-1], "cache")])
        print(f"\n### host time by method, last turn, cache on\n{stages.report(times)}\n\n"
              f"{breakdown}\n", flush=True)
        profiled: dict = {}
        conversation(probes, loader, args, "You are the profiled assistant. ",
                     look=lambda s: stages.profiled_first_step(s, profiled))
        print("\n### the last turn's first scheduler step (cache on) under torch.profiler\n"
              f"{profiled.get('table', '(none)')}\n", flush=True)
    if args.timeline:
        records: list = []
        rows = conversation(probes, loader, args, "You are the assistant on a timeline. ",
                            look=lambda s: stages.timeline(s, records))
        print("\n### the last turn (cache on) on a time line: ms from add_task; device: when "
              "the device reached the call's entry and exit\n"
              f"{stages.timeline_report(records, rows[-1]['cache']['ttft'])}\n", flush=True)


def median_rows(runs: list[list[dict]], names) -> list[dict]:
    """Per turn, the run with the median TTFT of each probe (its breakdown kept whole)."""
    rows = []
    for turn_rows in zip(*runs):
        row = dict(turn_rows[0])
        for name in names:
            ranked = sorted((r[name] for r in turn_rows), key=lambda r: r["ttft"])
            row[name] = ranked[len(ranked) // 2]
        row["equal"] = all(r["equal"] for r in turn_rows)
        rows.append(row)
    return rows


def run(args) -> list[dict]:
    """Build the model and both schedulers, run the conversations; rows of the median run."""
    model = common.build_model(args.preset, args.device, args.dtype, args.state_dtype)
    common.apply_product_options(model, args)
    loader = common.BenchLoader(model, f"random-{args.preset}")
    sync = bool(args.sync_prefill)
    probes = {"cache": Probe(model, loader, args.cache_mb, args.buffer_size, sync),
              "nocache": Probe(model, loader, 0, args.buffer_size, sync)}
    runs = []
    try:
        for i in range(args.warmup + args.repeat):
            rows = conversation(probes, loader, args, f"You are helpful assistant number {i}. ",
                                flip=i % 2 == 1)
            if i >= args.warmup:
                runs.append(rows)
        observe(probes, loader, args)
    finally:
        for p in probes.values():
            p.close()
    return median_rows(runs, probes)


def ms(s: float) -> str:
    return f"{s * 1e3:.1f}"


STAGES = ("queue", "prefill_model", "prefill_other", "first_pulse", "handover")


def tables(rows: list[dict]) -> str:
    main = [[r["turn"], r["prompt"], r["cache"]["prefilled"], r["cache"]["rounds"],
             r["cache"]["later"], r.get("warmed", {}).get("cache", 0),
             ms(r["cache"]["ttft"]), ms(r["nocache"]["ttft"]),
             f"{r['nocache']['ttft'] / r['cache']['ttft']:.1f}x", "yes" if r["equal"] else "no"]
            for r in rows]
    parts = [stage_row(r, name) for r in rows for name in ("cache", "nocache")]
    return (common.table(["turn", "prompt tokens", "prefilled (cache)", "rounds (cache)",
                          "later (cache)", "after reply (cache)",
                          "TTFT cache ms", "TTFT no cache ms", "ratio", "equal"], main)
            + "\n\nWhere the TTFT went (ms; the parts sum to the TTFT):\n\n"
            + common.table(STAGE_HEADER, parts))


STAGE_HEADER = ["turn", "scheduler", "queue", "prefill model", "prefill other", "first pulse",
                "hand-over", "TTFT"]


def stage_row(r: dict, name: str) -> list:
    return [r["turn"], name, *(ms(r[name][k]) for k in STAGES), ms(r[name]["ttft"])]


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m server.bench ttft", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="0.1b", choices=PRESETS)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--target", type=int, default=2000, help="prompt tokens at the last turn")
    p.add_argument("--max-tokens", type=int, default=32, help="reply length")
    p.add_argument("--buffer-size", type=int, default=32)
    p.add_argument("--cache-mb", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3, help="measured conversations (median)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured conversations first")
    p.add_argument("--device", default=None, type=common.device_arg, help="default: cuda if present, else cpu")
    p.add_argument("--dtype", default="fp16", choices=common.DTYPES,
                   help="fp16 becomes fp32 on cpu")
    p.add_argument("--state-dtype", default="fp32", choices=common.DTYPES)
    common.product_options(p)
    p.add_argument("--sync-prefill", type=int, default=1, choices=(0, 1),
                   help="1: synchronise around each engine.prefill call (its device time is "
                        "'prefill model'; the host waits there, which a server does not); 0: "
                        "as a server runs (host work after the pass overlaps it; 'prefill "
                        "model' is then the call's host time and the pass's device time lands "
                        "in later stages)")
    p.add_argument("--warm-next-turn", type=int, default=1, choices=(0, 1),
                   help="1 (the server's default, RWKV_CHAT_WARM_NEXT_TURN): after each reply "
                        "the history with it is computed before the next turn is sent")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--trace", action="store_true",
                   help="then one more conversation, its last cached turn under torch.profiler")
    p.add_argument("--stages", action="store_true",
                   help="then two more conversations: the host time of the cached "
                        "scheduler's methods in its last turn (server/bench/stages.py), and "
                        "that turn's first scheduler step under torch.profiler")
    p.add_argument("--timeline", action="store_true",
                   help="then one more conversation, its last cached turn's scheduler calls on "
                        "a time line (host and device; server/bench/stages.py)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    print(f"# ttft · {args.preset} · {args.turns} turns to ~{args.target} tokens · "
          f"{args.max_tokens}-token replies · buffer {args.buffer_size} · cache "
          f"{args.cache_mb} MB · median of {args.repeat} after {args.warmup} warm-up · "
          f"{common.gpu_name()}", flush=True)
    rows = run(args)
    print(tables(rows), flush=True)
    last = rows[-1]
    print(f"\nlast turn: {last['prompt']} prompt tokens, {last['cache']['prefilled']} prefilled "
          f"with the cache; TTFT {ms(last['cache']['ttft'])} ms vs {ms(last['nocache']['ttft'])}"
          f" ms ({last['nocache']['ttft'] / last['cache']['ttft']:.1f}x); all replies equal: "
          f"{all(r['equal'] for r in rows)}", flush=True)
    if args.json:
        for r in rows:
            for name in ("cache", "nocache"):
                r[name] = {k: v for k, v in r[name].items() if k != "output"}
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
