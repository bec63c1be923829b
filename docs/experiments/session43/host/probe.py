"""Per-request host marks of cached chat turns over HTTP (in-process server, tiny demo).

uv run python /tmp/qa43/host/probe.py --repeat 4 --out X.json [--lp lp.txt]

Marks (perf_counter_ns; scheduler-thread CPU via thread_time_ns):
 app: arrival, parsed, tokenised (_check_length), prepared, add_in, add_out
 sched: step_in (first step entry after add_task), admit_in, mp_in (model.prefill entry),
        mp_out, first (first token callback); cpu_* = scheduler thread CPU at those points
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, ".")
from server.bench import http_stages  # noqa: E402

ns = time.perf_counter_ns
cpu = time.thread_time_ns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lp", help="line_profiler output file")
    ap.add_argument("--client", default="raw")
    ap.add_argument("--gpu-like", action="store_true",
                    help="under_way after the step's passes (as on CUDA): no event-loop work "
                         "beside the scheduler's pre-pass path")
    ap.add_argument("--fine", action="store_true", help="wrap FINE functions (per-request sums)")
    args = ap.parse_args()
    import uvicorn

    from server.api.app import create_app
    from server.bench.chat import free_port, wait_until_served
    from server.config import Settings
    import server.api.routes.openai as routes

    tmp = tempfile.TemporaryDirectory(prefix="qa43-")
    port = free_port()
    settings = Settings(demo="tiny", port=port, task_db_path=str(Path(tmp.name) / "t.db"))
    app = create_app(settings, freeze_heap=True)
    recs: list[dict] = []
    cur = {}
    lp_box = []

    class Rec:
        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if scope["type"] != "http" or scope["path"] != "/v1/chat/completions":
                return await self.app(scope, receive, send)
            rec = {"arrival": ns()}
            recs.append(rec)
            if lp_box and not cur.get("lp_a"):
                cur["lp_a"] = 1
                lp_box[0].enable()

            async def sending(msg):
                body = msg.get("body", b"") if msg["type"] == "http.response.body" else b""
                if b'"content":"' in body and b'"content":""' not in body:
                    rec.setdefault("text", ns())
                await send(msg)
            await self.app(scope, receive, sending)

    for name, key in (("parse_request", "parsed"), ("_check_length", "tokenised"),
                      ("prepare_tasks", "prepared")):
        real = getattr(routes, name)
        import inspect
        if inspect.iscoroutinefunction(real):
            async def marked(*a, _real=real, _k=key, **k):
                out = await _real(*a, **k)
                recs[-1][_k] = ns()
                return out
        else:
            def marked(*a, _real=real, _k=key, **k):
                out = _real(*a, **k)
                recs[-1][_k] = ns()
                return out
        setattr(routes, name, marked)

    config = uvicorn.Config(Rec(app), host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    url = f"http://127.0.0.1:{port}"
    lp = None
    try:
        wait_until_served(url, seconds=600)
        sched = app.state.runtime.scheduler
        if args.gpu_like:
            sched._async_device = True
        if args.fine:
            install_fine(sched, cur)
        real_add = sched.add_task

        def add_task(task):
            rec = recs[-1]
            rec["add_in"] = ns()
            cb = task.collect_callback

            def first(tokens):
                if "first" not in rec:
                    rec["first"], rec["cpu_first"] = ns(), cpu()
                if cb is not None:
                    return cb(tokens)
            task.collect_callback = first
            cur["rec"] = rec
            try:
                return real_add(task)
            finally:
                rec["add_out"] = ns()
        sched.add_task = add_task

        real_step = sched.step

        def step():
            if lp is not None and not cur.get("lp_s"):
                cur["lp_s"] = 1
                lp.enable()
            rec = cur.get("rec")
            if rec is not None and "add_in" in rec and "step_in" not in rec:
                rec["step_in"], rec["cpu_step_in"] = ns(), cpu()
            return real_step()
        sched.step = step
        real_admit = sched._admit

        def admit():
            rec = cur.get("rec")
            if rec is not None and "step_in" in rec and "admit_in" not in rec:
                rec["admit_in"], rec["cpu_admit_in"] = ns(), cpu()
            return real_admit()
        sched._admit = admit
        model = sched.engine.model
        real_mp = model.prefill

        def mp(*a, **k):
            rec = cur.get("rec")
            mine = rec is not None and "admit_in" in rec and "mp_in" not in rec
            if mine:
                rec["mp_in"], rec["cpu_mp_in"] = ns(), cpu()
            try:
                return real_mp(*a, **k)
            finally:
                if mine:
                    rec["mp_out"], rec["cpu_mp_out"] = ns(), cpu()
        model.prefill = mp

        if args.lp:
            from line_profiler import LineProfiler
            from server.scheduler import base, cycle, engine, prefill, prefix_cache
            from server.model import state as mstate
            from server.api import completion, prefix as aprefix, chat as achat
            from server.api.routes import openai_schemas, openai_format
            from server.model import tokenizer as mtok
            from server.task import task as ttask
            lp = LineProfiler()
            fns = [base.BaseScheduler.add_task, base.BaseScheduler._loop,
                   base.BaseScheduler.step, cycle.SlotCycle._admit,
                   cycle.SlotCycle._drop_stopped_waiting, cycle.SlotCycle._prefill,
                   cycle.SlotCycle._being_fed, cycle.SlotCycle._start_ready,
                   cycle.SlotCycle._pulse, cycle.SlotCycle._split_unfit,
                   engine.BatchEngine.load, engine.BatchEngine._fill_rows,
                   engine.BatchEngine.prefill, engine.BatchEngine.start,
                   engine.BatchEngine.write_params, engine.BatchEngine.pulse,
                   prefill.Prefiller.run, prefill.Prefiller._run, prefill.Prefiller._seq,
                   prefill.Prefiller._shares, prefill.Prefiller._choose_points,
                   prefill.Prefiller._find, prefill.Prefiller._take, prefill.Prefiller._jump,
                   prefill.Prefiller._plan, prefill.Prefiller._feed,
                   prefill.Prefiller._keep_later, prefill.Prefiller._export_points,
                   prefill.Prefiller._store, prefill.Prefiller._store_state,
                   prefill.Prefiller._order, prefill.Prefiller._age,
                   prefill.Prefiller.find_at_admission, prefill.Prefiller._drop_warm_for,
                   prefix_cache.prefix_hashes, prefix_cache.PrefixCache.lookup,
                   prefix_cache.PrefixCache.insert, prefix_cache.common_prefix,
                   mtok.common_prefix_length,
                   routes.chat_completions, routes._submit, routes.sampling_params,
                   completion.make_tasks, completion.submit, aprefix.prepare_tasks,
                   aprefix.find_template, achat.build_chat_prompt,
                   openai_schemas.parse_request, ttask.Task.__init__,
                   ttask.Task.check_params]
            for f in fns:
                lp.add_function(f)
            for name in dir(mstate.State):
                f = getattr(mstate.State, name)
                if callable(f) and not name.startswith("__") and hasattr(f, "__code__"):
                    lp.add_function(f)
            import server.model.forward as rw
            if hasattr(rw, "RWKV7"):
                lp.add_function(rw.RWKV7.prefill)
            lp_box.append(lp)
        gc_n = []
        cb = lambda ph, info: gc_n.append(info["generation"]) if ph == "start" else None
        gc.callbacks.append(cb)
        subprocess.run([sys.executable, "-m", "server.bench.chat", "--url-on", url, "--url-off",
                        url, "--turns", str(args.turns), "--repeat", str(args.repeat),
                        "--client", args.client], check=True, stdout=subprocess.DEVNULL)
        gc.callbacks.remove(cb)
        if lp is not None:
            with open(args.lp, "w") as f:
                lp.print_stats(stream=f, output_unit=1e-6)
        print("gc collections during run:", len(gc_n))
    finally:
        server.should_exit = True
        th.join(30)
        tmp.cleanup()
    Path(args.out).write_text(json.dumps(recs))
    summarize(recs, args.turns)


FINE = [  # (label, object path from the scheduler, attribute)
    ("_drop_stopped_waiting", "", "_drop_stopped_waiting"), ("_admit", "", "_admit"),
    ("_split_unfit", "", "_split_unfit"), ("stats.on_admit", "stats", "on_admit"),
    ("find_at_admission", "prefiller", "find_at_admission"), ("engine.load", "engine", "load"),
    ("engine._fill_rows", "engine", "_fill_rows"), ("state.zero_", "engine.state", "zero_"),
    ("_prefill", "", "_prefill"), ("_being_fed", "", "_being_fed"),
    ("prefiller.run", "prefiller", "run"), ("_order", "prefiller", "_order"),
    ("_seq", "prefiller", "_seq"), ("_shares", "prefiller", "_shares"),
    ("_choose_points", "prefiller", "_choose_points"), ("_jump", "prefiller", "_jump"),
    ("_find", "prefiller", "_find"), ("cache.lookup", "prefiller.cache", "lookup"),
    ("_take", "prefiller", "_take"), ("state.assign", "engine.state", "assign"),
    ("_plan", "prefiller", "_plan"), ("_export_points", "prefiller", "_export_points"),
    ("_keep_later", "prefiller", "_keep_later"), ("_feed", "prefiller", "_feed"),
    ("engine.prefill", "engine", "prefill"), ("state.rows", "engine.state", "rows"),
    ("_store", "prefiller", "_store"), ("cache.insert", "prefiller.cache", "insert"),
    ("_start_ready", "", "_start_ready"), ("engine.start", "engine", "start"),
    ("write_params", "engine", "write_params"), ("_pulse", "", "_pulse"),
    ("engine.pulse", "engine", "pulse"), ("stats.on_tokens", "stats", "on_tokens"),
]


def install_fine(sched, cur):
    import server.scheduler.prefill as pf
    for label, path, name in FINE:
        obj = sched
        for part in filter(None, path.split(".")):
            obj = getattr(obj, part)
        real = getattr(obj, name)

        def wrapped(*a, _real=real, _label=label, **k):
            rec = cur.get("rec")
            if rec is None or "step_in" not in rec or "first" in rec:
                return _real(*a, **k)
            t0, c0 = ns(), cpu()
            try:
                return _real(*a, **k)
            finally:
                f = rec.setdefault("fine", {})
                w, c, n = f.get(_label, (0, 0, 0))
                f[_label] = (w + ns() - t0, c + cpu() - c0, n + 1)
        setattr(obj, name, wrapped)
    real_ph = pf.prefix_hashes

    def ph(*a, **k):
        rec = cur.get("rec")
        t0 = ns()
        try:
            return real_ph(*a, **k)
        finally:
            if rec is not None and "step_in" in rec and "first" not in rec:
                f = rec.setdefault("fine", {})
                w, c, n = f.get("prefix_hashes", (0, 0, 0))
                f["prefix_hashes"] = (w + ns() - t0, 0, n + 1)
    pf.prefix_hashes = ph


def pieces(r):
    a = r["arrival"]
    d = {
        "arr->parsed": r["parsed"] - a,
        "parsed->tokenised": r["tokenised"] - r["parsed"],
        "tokenised->prepared": r["prepared"] - r["tokenised"],
        "prepared->add_in": r["add_in"] - r["prepared"],
        "arr->add_in": r["add_in"] - a,
        "add_task": r["add_out"] - r["add_in"],
        "add_in->step_in": r["step_in"] - r["add_in"],
        "step_in->mp_in": r["mp_in"] - r["step_in"],
        "cpu step_in->mp_in": r["cpu_mp_in"] - r["cpu_step_in"],
        "add_in->mp_in": r["mp_in"] - r["add_in"],
        "mp": r["mp_out"] - r["mp_in"],
        "mp_out->first": r["first"] - r["mp_out"],
        "cpu mp_out->first": r["cpu_first"] - r["cpu_mp_out"],
        "first->text": r["text"] - r["first"] if "text" in r else float("nan"),
        "arr->text": r["text"] - a if "text" in r else float("nan"),
    }
    return {k: v / 1e3 for k, v in d.items()}


def summarize(recs, turns):
    rows = {"turn": [], "again": []}
    per_conv = 2 * turns
    for i, r in enumerate(recs):
        if i % per_conv < 2:  # first turn of a conversation: not a cached turn
            continue
        need = ("parsed", "tokenised", "prepared", "add_in", "step_in", "mp_in", "first")
        if not all(k in r for k in need):
            continue
        rows["turn" if i % 2 == 0 else "again"].append(pieces(r))
    fine = [r["fine"] for i, r in enumerate(recs) if i % per_conv >= 2 and i % 2 == 0
            and "fine" in r]
    if fine:
        print(f"\nturn: fine, inclusive µs (median wall / median cpu / calls), {len(fine)} requests")
        for label in dict.fromkeys(k for f in fine for k in f):
            ws = [f.get(label, (0, 0, 0)) for f in fine]
            print(f"  {label:22s} {statistics.median(w for w, _, _ in ws) / 1e3:8.1f} "
                  f"{statistics.median(c for _, c, _ in ws) / 1e3:8.1f} "
                  f"{statistics.median(n for _, _, n in ws):4.0f}")
    for kind, ps in rows.items():
        if not ps:
            continue
        print(f"\n{kind}: {len(ps)} requests, µs median [p25-p75]")
        for k in ps[0]:
            xs = sorted(p[k] for p in ps)
            q = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]
            print(f"  {k:22s} {statistics.median(xs):9.1f}  [{q(.25):8.1f} - {q(.75):8.1f}]")


if __name__ == "__main__":
    main()
