"""HTTP soak of RWKV-Server's fast-forward path and everything around it.

usage: python soak.py DURATION_S [--base URL] [--pid SERVER_PID] [--tag NAME]
Writes OUT/<tag>_results.jsonl, <tag>_problems.jsonl, <tag>_waves.jsonl, <tag>_summary.json.
"""
import argparse
import asyncio
import collections
import json
import os
import random
import sys
import time
import traceback

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import *  # noqa

OUT = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("duration", type=float)
ap.add_argument("--base", default=BASE)
ap.add_argument("--pid", type=int, default=0)
ap.add_argument("--tag", default="soak")
ap.add_argument("--seed", type=int, default=47)
args = ap.parse_args()
B = args.base
R = random.Random(args.seed)

counts = collections.Counter()
status_counts = collections.Counter()
problems = []
res_f = open(f"{OUT}/{args.tag}_results.jsonl", "w")
prob_f = open(f"{OUT}/{args.tag}_problems.jsonl", "w")
wave_f = open(f"{OUT}/{args.tag}_waves.jsonl", "w")
det_records = collections.defaultdict(list)  # probe name -> [(phase, comparable)]
pair_stats = collections.Counter()
HANG_S = 240


def record(kind, status, probs, body=None, resp=None, elapsed=0.0, url=None):
    counts[kind] += 1
    status_counts[status] += 1
    res_f.write(json.dumps({"kind": kind, "status": status, "elapsed": round(elapsed, 3),
                            "problems": probs}) + "\n")
    if probs:
        p = {"t": time.strftime("%H:%M:%S"), "kind": kind, "status": status, "url": url,
             "problems": probs, "body": body,
             "resp": (resp if isinstance(resp, (dict, list)) else str(resp)[:3000])}
        problems.append(p)
        prob_f.write(json.dumps(p, ensure_ascii=False) + "\n")
        prob_f.flush()
        print("PROBLEM", kind, status, probs[:3], flush=True)


def rsamp(body, temp=None):
    """random sampling fields."""
    body["temperature"] = temp if temp is not None else R.choice([0, 1, 1, 0.7])
    if R.random() < 0.6:
        body["seed"] = R.randrange(1, 10**6)
    if R.random() < 0.3:
        body["presence_penalty"] = R.choice([0, 0.5, 2.0])
    if R.random() < 0.3:
        body["frequency_penalty"] = R.choice([0, 0.3, 1.0])
    if R.random() < 0.25:
        body["logit_bias"] = R.choice(BIASES[1:])
    if R.random() < 0.2:
        body["top_p"] = R.choice([0.3, 0.9, 1.0])
    return body


def rmax():
    return R.choice([R.randint(1, 24), R.randint(25, 80), R.randint(80, 300)])


def forced_body(stream=None, n=None, max_tokens=None):
    names = R.sample(list(TOOLS), R.randint(1, len(TOOLS)))
    forced = R.choice(names) if R.random() < 0.6 else None
    body = {"model": "rwkv-7", "max_tokens": max_tokens or rmax(),
            "messages": [{"role": "user", "content": R.choice(USER_MSGS)}],
            "tools": tool_list(names),
            "tool_choice": {"type": "function", "function": {"name": forced}} if forced else "required",
            "stream": R.random() < 0.5 if stream is None else stream, "n": n or R.choice([1, 1, 1, 2, 3, 4])}
    rsamp(body)
    if R.random() < 0.15:
        body["logprobs"] = True
        body["top_logprobs"] = R.randint(0, 3)
    if R.random() < 0.15:
        body["stop"] = R.choice(["\"", "}", ",", "\n"])
    if R.random() < 0.2:
        body["parallel_tool_calls"] = R.choice([True, False])
    if R.random() < 0.2 and body["messages"]:
        body["messages"].insert(0, {"role": "system", "content": "You call tools."})
    if body["stream"] and R.random() < 0.5:
        body["stream_options"] = {"include_usage": True}
    return body, names, forced


async def post_chat(cl, path, body):
    """Returns (status, {index: accumulated choice}, raw, usage)."""
    if body.get("stream"):
        choices, usage, done, errs = {}, None, False, []
        async with cl.stream("POST", B + path, json=body) as resp:
            if resp.status_code != 200:
                raw = (await resp.aread()).decode(errors="replace")
                return resp.status_code, None, raw, None
            async for ev in sse_events(resp):
                if ev == "[DONE]":
                    done = True
                    continue
                if "error" in ev:
                    errs.append(ev["error"])
                    continue
                if ev.get("usage"):
                    usage = ev["usage"]
                if path.endswith("chat/completions"):
                    accumulate_chat(choices, ev)
                else:
                    for ch in ev.get("choices", []):
                        c = choices.setdefault(ch["index"], empty_choice())
                        c["content"] += ch.get("text") or ""
                        if ch.get("finish_reason"):
                            c["finish_reason"] = ch["finish_reason"]
        raw = {"done": done, "errors": errs}
        return (200 if done and not errs else -1), choices, raw, usage
    resp = await cl.post(B + path, json=body)
    if resp.status_code != 200:
        return resp.status_code, None, resp.text, None
    j = resp.json()
    if path.endswith("chat/completions"):
        choices = {ch["index"]: norm_chat_choice(ch) for ch in j["choices"]}
    else:
        choices = {ch["index"]: {"content": ch["text"], "reasoning": "", "tool_calls": {},
                                 "finish_reason": ch["finish_reason"],
                                 "logprobs": (ch.get("logprobs") or {}).get("tokens") or []}
                   for ch in j["choices"]}
    return 200, choices, j, j.get("usage")


def usage_probs(body, choices, usage):
    probs = []
    n = body.get("n", 1)
    if len(choices) != n:
        probs.append(f"{len(choices)} choices for n={n}")
    if usage:
        if usage["completion_tokens"] > n * body["max_tokens"]:
            probs.append(f"completion_tokens {usage['completion_tokens']} > n*max_tokens {n * body['max_tokens']}")
    for i, c in choices.items():
        if c["finish_reason"] is None:
            probs.append(f"choice {i} has no finish_reason")
        if body.get("logprobs") and body.get("stream") is False and len(c["logprobs"]) > body["max_tokens"]:
            probs.append(f"choice {i}: {len(c['logprobs'])} logprob entries > max_tokens")
    return probs


# ---------------------------------------------------------------- jobs
async def job_forced(cl):
    body, names, forced = forced_body()
    t0 = time.time()
    st, choices, raw, usage = await post_chat(cl, "/v1/chat/completions", body)
    probs = []
    if st != 200:
        probs.append(f"HTTP/stream status {st}: {str(raw)[:300]}")
    else:
        probs += usage_probs(body, choices, usage)
        for i, c in choices.items():
            probs += [f"choice {i}: {p}" for p in check_forced(c, names, forced, body["max_tokens"])]
            if body.get("logprobs") and c["finish_reason"] and usage and body["n"] == 1 and \
                    len(c["logprobs"]) != usage["completion_tokens"]:
                probs.append(f"logprobs entries {len(c['logprobs'])} != completion_tokens {usage['completion_tokens']}")
    record("forced" + ("_stream" if body["stream"] else ""), st, probs, body,
           raw if probs else None, time.time() - t0, "/v1/chat/completions")


async def job_pair(cl):
    """the same seeded request (temperature 1) streamed and not: the replies must agree."""
    kind = R.choice(["forced", "forced", "json_chat", "json_completion"])
    if kind == "forced":
        body, names, forced = forced_body(stream=False)
        path = "/v1/chat/completions"
    elif kind == "json_chat":
        body = {"model": "rwkv-7", "messages": [{"role": "user", "content": R.choice(USER_MSGS)}],
                "max_tokens": rmax(), "n": R.choice([1, 2]),
                "response_format": rf_schema(R.choice(list(SCHEMAS))) if R.random() < 0.8 else {"type": "json_object"}}
        rsamp(body)
        path = "/v1/chat/completions"
    else:
        body = {"model": "rwkv-7", "prompt": "User: give me JSON\n\nAssistant:", "max_tokens": rmax(),
                "n": R.choice([1, 2]),
                "response_format": rf_schema(R.choice(list(SCHEMAS))) if R.random() < 0.8 else {"type": "json_object"}}
        rsamp(body)
        path = "/v1/completions"
    body["temperature"] = 1
    body["seed"] = R.randrange(1, 10**6)
    body.pop("logprobs", None)
    body.pop("top_logprobs", None)
    b2 = dict(body, stream=True)
    t0 = time.time()
    (s1, c1, r1, u1), (s2, c2, r2, u2) = await asyncio.gather(
        post_chat(cl, path, body), post_chat(cl, path, b2))
    probs = []
    if s1 != 200 or s2 != 200:
        probs.append(f"status {s1}/{s2}: {str(r1)[:200]} {str(r2)[:200]}")
    else:
        a = {i: comparable(c) for i, c in c1.items()}
        b = {i: comparable(c) for i, c in c2.items()}
        if a != b:
            # arguments of tool calls are rewritten with blanks in both; compare exactly
            probs.append(f"stream and non-stream differ: {json.dumps(a)[:600]} VS {json.dumps(b)[:600]}")
            pair_stats["differ"] += 1
        else:
            pair_stats["agree"] += 1
        if u1 and u2 and u1.get("completion_tokens") != u2.get("completion_tokens"):
            probs.append(f"usage differs {u1} vs {u2}")
    record("pair_" + kind, s1 if s1 != 200 else s2, probs, body, {"ns": r1 if probs else None}, time.time() - t0, path)


async def job_n_vs_seed(cl):
    body, names, forced = forced_body(stream=R.random() < 0.5, n=3)
    body["temperature"] = 1
    body["seed"] = s = R.randrange(1, 10**6)
    body.pop("logprobs", None)
    body.pop("top_logprobs", None)
    t0 = time.time()
    singles = [dict(body, n=1, seed=s + i) for i in range(3)]
    outs = await asyncio.gather(*[post_chat(cl, "/v1/chat/completions", b) for b in [body] + singles])
    probs = []
    if any(o[0] != 200 for o in outs):
        probs.append(f"statuses {[o[0] for o in outs]}")
    else:
        multi = outs[0][1]
        for i in range(3):
            if comparable(multi[i]) != comparable(outs[1 + i][1][0]):
                probs.append(f"choice {i} of n=3 differs from n=1 seed+{i}: {comparable(multi[i])} VS {comparable(outs[1 + i][1][0])}")
    pair_stats["n_vs_seed_" + ("bad" if probs else "ok")] += 1
    record("n_vs_seed", outs[0][0], probs, body, None, time.time() - t0, "/v1/chat/completions")


async def job_lp_vs_plain(cl):
    """logprobs (decoded step by step) vs plain (fast-forwarded): same seed, should agree up to rounding."""
    body, names, forced = forced_body(stream=False, n=1)
    body["temperature"] = 1
    body["seed"] = R.randrange(1, 10**6)
    body.pop("logprobs", None)
    body.pop("top_logprobs", None)
    b2 = dict(body, logprobs=True, top_logprobs=1)
    (s1, c1, r1, u1), (s2, c2, r2, u2) = await asyncio.gather(
        post_chat(cl, "/v1/chat/completions", body), post_chat(cl, "/v1/chat/completions", b2))
    probs = []
    if s1 != 200 or s2 != 200:
        probs.append(f"status {s1}/{s2}")
    elif comparable(c1[0]) != comparable(c2[0]):
        pair_stats["lp_vs_plain_differ"] += 1
        probs.append(f"NOTE(ff vs stepwise) differ: {comparable(c1[0])} VS {comparable(c2[0])}")
    else:
        pair_stats["lp_vs_plain_agree"] += 1
    record("lp_vs_plain", s1, probs, body, None, 0, "/v1/chat/completions")


async def job_json_chat(cl):
    name = R.choice(list(SCHEMAS) + [None])
    body = {"model": "rwkv-7", "messages": [{"role": "user", "content": R.choice(USER_MSGS)}],
            "max_tokens": rmax(), "n": R.choice([1, 1, 2, 3]), "stream": R.random() < 0.5,
            "response_format": rf_schema(name) if name else {"type": "json_object"}}
    rsamp(body)
    if R.random() < 0.15:
        body["logprobs"] = True
    if R.random() < 0.2:
        body["reasoning_effort"] = R.choice(["none", "low"])
    t0 = time.time()
    st, choices, raw, usage = await post_chat(cl, "/v1/chat/completions", body)
    probs = []
    if st != 200:
        probs.append(f"status {st}: {str(raw)[:300]}")
    else:
        probs += usage_probs(body, choices, usage)
        for i, c in choices.items():
            if c["reasoning"]:
                probs.append(f"choice {i}: reasoning in a formatted reply")
            probs += [f"choice {i}: {p}" for p in check_json_reply(c["content"], c["finish_reason"],
                                                                     SCHEMAS[name] if name else None)]
            if c["finish_reason"] not in ("stop", "length"):
                probs.append(f"choice {i}: finish {c['finish_reason']}")
    record("json_chat" + ("_stream" if body["stream"] else ""), st, probs, body, raw if probs else None,
           time.time() - t0, "/v1/chat/completions")


async def job_json_completion(cl):
    name = R.choice(list(SCHEMAS) + [None])
    body = {"model": "rwkv-7", "prompt": R.choice(["User: JSON please\n\nAssistant:", "Data:", "{"]),
            "max_tokens": rmax(), "n": R.choice([1, 1, 2, 4]), "stream": R.random() < 0.5,
            "response_format": rf_schema(name) if name else {"type": "json_object"}}
    rsamp(body)
    if R.random() < 0.15:
        body["logprobs"] = R.randint(0, 3)
    t0 = time.time()
    st, choices, raw, usage = await post_chat(cl, "/v1/completions", body)
    probs = []
    if st != 200:
        probs.append(f"status {st}: {str(raw)[:300]}")
    else:
        probs += usage_probs(body, choices, usage)
        for i, c in choices.items():
            probs += [f"choice {i}: {p}" for p in check_json_reply(c["content"], c["finish_reason"],
                                                                     SCHEMAS[name] if name else None)]
    record("json_completion" + ("_stream" if body["stream"] else ""), st, probs, body, raw if probs else None,
           time.time() - t0, "/v1/completions")


async def job_free(cl):
    body = {"model": "rwkv-7", "messages": [{"role": "user", "content": R.choice(USER_MSGS)}],
            "max_tokens": rmax(), "n": R.choice([1, 1, 2]), "stream": R.random() < 0.5}
    rsamp(body)
    if R.random() < 0.5:
        body["reasoning_effort"] = "none"
    if R.random() < 0.3:
        names = R.sample(list(TOOLS), 2)
        body["tools"] = tool_list(names)
        body["tool_choice"] = R.choice(["auto", "none"])
    if R.random() < 0.2:
        body["stop"] = ["\n\n", "."]
    if R.random() < 0.1:
        body["logprobs"] = True
    t0 = time.time()
    st, choices, raw, usage = await post_chat(cl, "/v1/chat/completions", body)
    probs = []
    if st != 200:
        probs.append(f"status {st}: {str(raw)[:300]}")
    else:
        probs += usage_probs(body, choices, usage)
    record("free" + ("_stream" if body["stream"] else ""), st, probs, body, raw if probs else None,
           time.time() - t0, "/v1/chat/completions")


async def job_disconnect(cl):
    """stream and drop the connection after a few events."""
    which = R.choice(["forced", "json", "free", "task"])
    if which == "forced":
        body, _, _ = forced_body(stream=True)
        body["max_tokens"] = R.randint(20, 300)
        path = "/v1/chat/completions"
    elif which == "json":
        body = {"model": "rwkv-7", "messages": [{"role": "user", "content": "json"}], "stream": True,
                "max_tokens": R.randint(20, 300), "response_format": rf_schema(R.choice(list(SCHEMAS)))}
        path = "/v1/chat/completions"
    elif which == "free":
        body = {"model": "rwkv-7", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                "max_tokens": R.randint(50, 400)}
        path = "/v1/chat/completions"
    else:
        body = {"prompt": "User: JSON\n\nAssistant:", "stream": True, "max_tokens": R.randint(20, 300),
                "response_format": rf_schema(R.choice(list(SCHEMAS)))}
        path = "/v1/tasks/tmp"
    k = R.randint(0, 6)
    t0 = time.time()
    st = 0
    try:
        async with cl.stream("POST", B + path, json=body) as resp:
            st = resp.status_code
            seen = 0
            if st == 200 and k == 0:
                pass  # drop right after headers
            else:
                async for line in resp.aiter_lines():
                    if line.startswith("data:"):
                        seen += 1
                        if seen >= k:
                            break
    except Exception as e:
        record("disconnect_" + which, -2, [f"exception {e!r}"], body, None, time.time() - t0, path)
        return
    record("disconnect_" + which, st, [] if st == 200 else [f"status {st}"], body, None, time.time() - t0, path)


async def read_task_stream(cl, tid, pos):
    text, errs, done = "", [], False
    async with cl.stream("GET", f"{B}/v1/tasks/{tid}/stream", params={"pos": pos}) as resp:
        if resp.status_code != 200:
            return resp.status_code, (await resp.aread()).decode(errors="replace"), [], False
        async for ev in sse_events(resp):
            if ev == "[DONE]":
                done = True
                continue
            if "error" in ev:
                errs.append(ev)
            if "data" in ev:
                text += ev["data"]
    return 200, text, errs, done


async def wait_task(cl, tid, poll_status=False, timeout=HANG_S):
    """poll get_result until finished; with poll_status also watch status never go back to 0/1 once 2."""
    seq = []
    t0 = time.time()
    while time.time() - t0 < timeout:
        if poll_status:
            s = (await cl.get(f"{B}/v1/tasks/{tid}/status")).json()
            if not seq or seq[-1] != s["status"]:
                seq.append(s["status"])
        r = await cl.get(f"{B}/v1/tasks/{tid}/get_result")
        if r.status_code != 200:
            return r.status_code, r.text, seq
        j = r.json()
        if j["finished"]:
            return 200, j, seq
        await asyncio.sleep(0.02 if poll_status else 0.1)
    return -3, "timeout waiting for the task", seq


def task_check(text, gen, max_tokens, schema_name, stopped=False):
    if gen > max_tokens:
        return [f"generated {gen} > max_tokens {max_tokens}"]
    if gen < max_tokens and not stopped:
        try:
            obj = json.loads(text)
        except Exception as e:
            return [f"ended before max_tokens ({gen}/{max_tokens}) but does not parse ({e}): {text[:200]!r}"]
        if schema_name is None:
            return [] if isinstance(obj, dict) else ["json_object reply is not an object"]
        err = validate(obj, SCHEMAS[schema_name])
        return [f"{err}: {text[:200]}"] if err else []
    return []


async def job_task_tmp(cl):
    name = R.choice(list(SCHEMAS) + [None])
    body = {"prompt": "User: give JSON\n\nAssistant:", "max_tokens": rmax(), "stream": True,
            "response_format": rf_schema(name) if name else {"type": "json_object"},
            "temperature": R.choice([0, 1]), "top_p": R.choice([0.3, 1.0])}
    if R.random() < 0.6:
        body["seed"] = R.randrange(1, 10**6)
    if R.random() < 0.2:
        body["logit_bias"] = R.choice(BIASES[1:])
    if R.random() < 0.2:
        body["presence_penalty"] = 1.0
    t0 = time.time()
    text, tid, errs, done = "", None, [], False
    async with cl.stream("POST", B + "/v1/tasks/tmp", json=body) as resp:
        st = resp.status_code
        if st != 200:
            record("task_tmp", st, [f"status {st}: {(await resp.aread())[:300]!r}"], body, None, 0, "/v1/tasks/tmp")
            return
        async for ev in sse_events(resp):
            if ev == "[DONE]":
                done = True
            elif "error" in ev:
                errs.append(ev)
            else:
                tid = ev.get("task_id", tid)
                text += ev.get("data", "")
    probs = []
    if not done or errs:
        probs.append(f"stream done={done} errors={errs}")
    s = await cl.get(f"{B}/v1/tasks/{tid}/status")
    if s.status_code == 200:
        sj = s.json()
        if sj["status"] != 3:
            probs.append(f"status after stream end {sj}")
        probs += task_check(text, sj["generated_buf"], body["max_tokens"], name)
    else:
        pair_stats["tmp_status_" + str(s.status_code)] += 1
        # no token count: check only what parses
        try:
            obj = json.loads(text)
            err = validate(obj, SCHEMAS[name]) if name else None
            if err:
                probs.append(err)
        except Exception:
            pass
    record("task_tmp", 200, probs, body, {"text": text[:500]}, time.time() - t0, "/v1/tasks/tmp")


async def job_task_flow(cl):
    """create (persistent, constrained) + stream readers at offsets + status poller; continue; fork."""
    name = R.choice(list(SCHEMAS) + [None])
    mt = rmax()
    body = {"prompt": "User: give JSON\n\nAssistant:", "max_tokens": mt,
            "response_format": rf_schema(name) if name else {"type": "json_object"},
            "temperature": R.choice([0, 1]), "seed": R.randrange(1, 10**6)}
    t0 = time.time()
    r = await cl.post(B + "/v1/tasks/create", json=body)
    if r.status_code != 200:
        record("task_create", r.status_code, [f"status {r.status_code}: {r.text[:300]}"], body, None, 0, "/v1/tasks/create")
        return
    tid = r.json()["task_id"]
    offsets = sorted(R.sample(range(0, 8), R.randint(1, 3)))
    readers = [asyncio.create_task(read_task_stream(cl, tid, p)) for p in offsets]
    st, j, seq = await wait_task(cl, tid, poll_status=True)
    probs = []
    if st != 200:
        probs.append(f"wait: {st} {str(j)[:200]}")
        record("task_create", st, probs, body, None, time.time() - t0, "/v1/tasks/create")
        for t in readers:
            t.cancel()
        return
    text = j["result"]
    # status sequence: once RUNNING (2) seen, never back to PREFILL/READY
    if 2 in seq and any(s in (0, 1) for s in seq[seq.index(2):]):
        probs.append(f"status went back after RUNNING: {seq}")
    sj = (await cl.get(f"{B}/v1/tasks/{tid}/status")).json()
    probs += task_check(text, sj["generated_buf"], mt, name)
    try:
        outs = await asyncio.wait_for(asyncio.gather(*readers), 60)
    except asyncio.TimeoutError:
        outs = []
        probs.append(f"stream readers at {offsets} did not end within 60 s of the task's end "
                     f"(generated {sj['generated_buf']})")
    for p, o in zip(offsets, outs):
        rst, rtext, rerrs, rdone = o
        if rst != 200 or rerrs or not rdone:
            probs.append(f"stream pos={p}: status {rst} errs {rerrs} done {rdone} {str(rtext)[:100]}")
        elif p == 0 and rtext != text:
            probs.append(f"stream pos=0 text != get_result: {rtext[:200]!r} vs {text[:200]!r}")
        elif p > 0 and not text.endswith(rtext):
            probs.append(f"stream pos={p} text is not a suffix of the result: {rtext[:200]!r} vs {text[:200]!r}")
    record("task_create", 200, probs, body, {"text": text[:400], "seq": seq}, time.time() - t0, "/v1/tasks/create")

    # continue with another schema (a prompt is needed after a constrained round)
    if R.random() < 0.7:
        n2 = R.choice(list(SCHEMAS))
        mt2 = rmax()
        cb = {"prompt": "\n\nUser: another one\n\nAssistant:", "max_tokens": mt2, "response_format": rf_schema(n2),
              "stream": R.random() < 0.5}
        if cb["stream"]:
            t1 = time.time()
            ctext, cerr, cdone = "", [], False
            async with cl.stream("POST", f"{B}/v1/tasks/{tid}/continue", json=cb) as resp:
                cst = resp.status_code
                if cst == 200:
                    async for ev in sse_events(resp):
                        if ev == "[DONE]":
                            cdone = True
                        elif "error" in ev:
                            cerr.append(ev)
                        else:
                            ctext += ev.get("data", "")
                else:
                    ctext = (await resp.aread()).decode(errors="replace")
            p2 = []
            if cst != 200 or cerr or not cdone:
                p2.append(f"continue stream: {cst} {cerr} done={cdone} {ctext[:200]}")
            else:
                sj = (await cl.get(f"{B}/v1/tasks/{tid}/status")).json()
                p2 += task_check(ctext, sj["generated_buf"], mt2, n2)
                g = (await cl.get(f"{B}/v1/tasks/{tid}/get_result")).json()
                if g["result"] != ctext:
                    p2.append(f"continue stream text != get_result: {ctext[:150]!r} vs {g['result'][:150]!r}")
            record("task_continue_stream", cst, p2, cb, None, time.time() - t1, f"/v1/tasks/{tid}/continue")
        else:
            t1 = time.time()
            r = await cl.post(f"{B}/v1/tasks/{tid}/continue", json=cb)
            p2 = []
            if r.status_code != 200:
                p2.append(f"continue {r.status_code}: {r.text[:200]}")
            else:
                st, j2, _ = await wait_task(cl, tid)
                if st != 200:
                    p2.append(f"continue wait {st} {str(j2)[:200]}")
                else:
                    sj = (await cl.get(f"{B}/v1/tasks/{tid}/status")).json()
                    p2 += task_check(j2["result"], sj["generated_buf"], mt2, n2)
            record("task_continue", r.status_code, p2, cb, None, time.time() - t1, f"/v1/tasks/{tid}/continue")

    # fork it (tmp or persistent) with a schema
    if R.random() < 0.6:
        n3 = R.choice(list(SCHEMAS))
        mt3 = rmax()
        fb = {"prompt": "\n\nUser: fork\n\nAssistant:", "max_tokens": mt3, "response_format": rf_schema(n3),
              "seed": R.randrange(1, 10**6)}
        tmp = R.random() < 0.5
        t2 = time.time()
        r = await cl.post(f"{B}/v1/tasks/{tid}/fork", params={"tmp": str(tmp).lower()}, json=fb)
        p3 = []
        if r.status_code != 200:
            p3.append(f"fork {r.status_code}: {r.text[:200]}")
        else:
            fid = r.json()["task_id"]
            st, j3, _ = await wait_task(cl, fid)
            if st != 200:
                p3.append(f"fork wait {st} {str(j3)[:200]}")
            else:
                s3 = await cl.get(f"{B}/v1/tasks/{fid}/status")
                if s3.status_code == 200:
                    p3 += task_check(j3["result"], s3.json()["generated_buf"], mt3, n3)
                if not tmp and R.random() < 0.5:
                    d = await cl.post(f"{B}/v1/tasks/{fid}/delete")
                    if d.status_code != 200:
                        p3.append(f"delete {d.status_code} {d.text[:200]}")
        record("task_fork", r.status_code, p3, fb, None, time.time() - t2, f"/v1/tasks/{tid}/fork")
    if R.random() < 0.5:
        await cl.post(f"{B}/v1/tasks/{tid}/delete")


async def job_task_stop(cl):
    constrained = R.random() < 0.6
    body = {"prompt": "User: write\n\nAssistant:", "max_tokens": R.randint(100, 1500),
            "temperature": 1}
    if constrained:
        body["response_format"] = rf_schema(R.choice(list(SCHEMAS)))
    ep = R.choice(["create", "tmp"])
    t0 = time.time()
    if ep == "tmp":
        # tmp without stream answers at once too
        pass
    r = await cl.post(f"{B}/v1/tasks/{ep}", json=body)
    if r.status_code != 200:
        record("task_stop", r.status_code, [f"create {r.status_code}: {r.text[:200]}"], body, None, 0, ep)
        return
    tid = r.json()["task_id"]
    await asyncio.sleep(R.uniform(0, 1.0))
    s = await cl.post(f"{B}/v1/tasks/{tid}/stop")
    probs = []
    if s.status_code != 200:
        probs.append(f"stop {s.status_code}: {s.text[:200]}")
    st, j, _ = await wait_task(cl, tid, timeout=60)
    if st != 200:
        probs.append(f"after stop: {st} {str(j)[:200]}")
    else:
        sj = (await cl.get(f"{B}/v1/tasks/{tid}/status")).json()
        if sj["status"] != 3:
            probs.append(f"status after stop {sj}")
        if sj["generated_buf"] > body["max_tokens"]:
            probs.append(f"generated {sj['generated_buf']} > max_tokens")
        if constrained and sj["generated_buf"] < body["max_tokens"]:
            # stopped or complete: if it parses it must match
            try:
                obj = json.loads(j["result"])
                err = validate(obj, body["response_format"]["json_schema"]["schema"])
                if err:
                    probs.append(err)
            except Exception:
                pass
    record("task_stop_" + ep, s.status_code, probs, body, None, time.time() - t0, f"/v1/tasks/{ep}")


async def job_bad(cl):
    which = R.choice(["tool", "rf_chat", "rf_completion", "rf_task", "tools_and_rf", "named_missing"])
    if which == "tool":
        body = {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10,
                "tools": [{"type": "function", "function": {"name": "bad", "parameters": R.choice(BAD_TOOL_PARAMS)}}],
                "tool_choice": "required", "stream": R.random() < 0.5}
        path, want = "/v1/chat/completions", {400}
    elif which == "rf_chat":
        body = {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10,
                "response_format": R.choice(BAD_RF), "stream": R.random() < 0.5}
        path, want = "/v1/chat/completions", {400}
    elif which == "rf_completion":
        body = {"model": "rwkv-7", "prompt": "x", "max_tokens": 10, "response_format": R.choice(BAD_RF)}
        path, want = "/v1/completions", {400}
    elif which == "rf_task":
        body = {"prompt": "x", "max_tokens": 10, "response_format": R.choice(BAD_RF)}
        path, want = "/v1/tasks/" + R.choice(["tmp", "create"]), {422}
    elif which == "tools_and_rf":
        body = {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10,
                "tools": tool_list(["ping"]), "tool_choice": "required", "response_format": rf_schema("small")}
        path, want = "/v1/chat/completions", {400}
    else:
        body = {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10,
                "tools": tool_list(["ping"]), "tool_choice": {"type": "function", "function": {"name": "nope"}}}
        path, want = "/v1/chat/completions", {400}
    r = await cl.post(B + path, json=body)
    probs = [] if r.status_code in want else [f"expected {want}, got {r.status_code}: {r.text[:300]}"]
    record("bad_" + which, r.status_code, probs, body, None, 0, path)


DET_FORCED = {"model": "rwkv-7", "messages": [{"role": "user", "content": "Book me a flight to Rome."}],
              "tools": tool_list(["get_weather", "book_flight", "set_mode"]),
              "tool_choice": {"type": "function", "function": {"name": "book_flight"}},
              "max_tokens": 160, "temperature": 1, "seed": 4242}
DET_MODE = {"model": "rwkv-7", "messages": [{"role": "user", "content": "Set the mode."}],
            "tools": tool_list(["set_mode", "ping", "set_alarm"]), "tool_choice": "required",
            "max_tokens": 120, "temperature": 1, "seed": 99, "n": 2}
DET_JSON = {"model": "rwkv-7", "prompt": "User: JSON\n\nAssistant:", "response_format": rf_schema("fixed"),
            "max_tokens": 80, "temperature": 1, "seed": 7}
DETS = {"forced_flight": ("/v1/chat/completions", DET_FORCED), "forced_mode_n2": ("/v1/chat/completions", DET_MODE),
        "json_fixed": ("/v1/completions", DET_JSON)}


async def job_det(cl, phase, which=None):
    which = which or R.choice(list(DETS))
    path, body = DETS[which]
    st, choices, raw, usage = await post_chat(cl, path, dict(body, stream=R.random() < 0.5 if phase == "load" else False))
    if st != 200:
        record("det", st, [f"status {st}"], body, raw, 0, path)
        return
    det_records[which].append((phase, {i: comparable(c) for i, c in sorted(choices.items())}))
    record("det_" + phase, st, [], body, None, 0, path)


JOBS = [(job_forced, 30), (job_pair, 8), (job_n_vs_seed, 3), (job_lp_vs_plain, 3), (job_json_chat, 10),
        (job_json_completion, 8), (job_free, 6), (job_disconnect, 8), (job_task_tmp, 6), (job_task_flow, 5),
        (job_task_stop, 3), (job_bad, 3)]


async def run_job(cl, fn):
    t0 = time.time()
    try:
        await asyncio.wait_for(fn(cl), HANG_S)
    except asyncio.TimeoutError:
        record(fn.__name__, -3, [f"HANG: no completion within {HANG_S}s"], None, None, time.time() - t0)
    except Exception as e:
        record(fn.__name__, -2, [f"client exception {e!r}", traceback.format_exc()[-800:]], None, None, time.time() - t0)


async def client_loop(cl, deadline):
    fns, weights = zip(*JOBS)
    while time.time() < deadline:
        fn = R.choices(fns, weights)[0]
        await run_job(cl, fn)


def rss_mb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    except Exception:
        return None


async def health_idle(cl, timeout=90):
    t0 = time.time()
    h = None
    while time.time() - t0 < timeout:
        h = (await cl.get(B + "/health")).json()
        if h["active"] == 0 and h["queue"] == 0 and h["finishing"] == 0 and h["scoring"] == 0:
            return True, h, time.time() - t0
        await asyncio.sleep(0.25)
    return False, h, time.time() - t0


async def main():
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=100)
    async with httpx.AsyncClient(timeout=httpx.Timeout(HANG_S, connect=20), limits=limits) as cl:
        for _ in range(5):
            await job_det(cl, "alone_before", "forced_flight")
            await job_det(cl, "alone_before", "forced_mode_n2")
            await job_det(cl, "alone_before", "json_fixed")
        start = time.time()
        wave = 0
        while time.time() - start < args.duration:
            wave += 1
            conc = R.randint(16, 48)
            wlen = R.uniform(25, 55)
            deadline = time.time() + wlen
            w0 = time.time()
            n0 = sum(counts.values())
            tasks = [asyncio.create_task(client_loop(cl, deadline)) for _ in range(conc)]
            tasks += [asyncio.create_task(job_det(cl, "load")) for _ in range(6)]
            await asyncio.gather(*tasks)
            ok, h, waited = await health_idle(cl)
            await asyncio.sleep(3)  # let the idle trim run
            rec = {"wave": wave, "conc": conc, "secs": round(time.time() - w0, 1), "requests": sum(counts.values()) - n0,
                   "idle": ok, "idle_wait": round(waited, 2), "active": h["active"], "queue": h["queue"],
                   "finishing": h["finishing"], "capacity": h["capacity"], "rss_mb": rss_mb(args.pid),
                   "cache_entries": h["prefix_cache"]["entries"], "cache_mb": round(h["prefix_cache"]["bytes"] / 2**20, 1),
                   "problems_so_far": len(problems), "status": h["status"], "sched_alive": h["scheduler_alive"]}
            wave_f.write(json.dumps(rec) + "\n")
            wave_f.flush()
            print("WAVE", rec, flush=True)
            if not ok:
                record("health_idle", -4, [f"server not idle {waited:.0f}s after wave {wave}: {h}"])
        for _ in range(3):
            for w in DETS:
                await job_det(cl, "alone_after", w)
    # determinism
    det_summary = {}
    for w, recs in det_records.items():
        ref = recs[0][1]
        diff = [(ph, r) for ph, r in recs if r != ref]
        det_summary[w] = {"n": len(recs), "phases": dict(collections.Counter(ph for ph, _ in recs)),
                          "distinct": len({json.dumps(r, sort_keys=True) for _, r in recs}), "ref": ref}
        if diff:
            record("determinism", 0, [f"{w}: {len(diff)} of {len(recs)} replies differ from the first alone one",
                                      json.dumps(diff[:3])[:1500]], DETS[w][1], ref)
    summary = {"counts": dict(counts), "total": sum(counts.values()), "status_counts": {str(k): v for k, v in status_counts.items()},
               "problems": len(problems), "problem_kinds": dict(collections.Counter(p["kind"] for p in problems)),
               "pair_stats": dict(pair_stats), "length_with_complete_call": len(LENGTH_WITH_CALL), "determinism": det_summary}
    json.dump(summary, open(f"{OUT}/{args.tag}_summary.json", "w"), indent=1, ensure_ascii=False)
    print(json.dumps({k: v for k, v in summary.items() if k != "determinism"}, indent=1))
    print(json.dumps({w: {k: v for k, v in d.items() if k != "ref"} for w, d in det_summary.items()}))


asyncio.run(main())
