"""Probes /v1/tasks/fim and /v1/completions with odd inputs (item 3 of session 66's QA brief):
empty prefix/suffix, huge max_tokens, stop sequences, echo, logprobs, n>1, best_of, suffix.

    uv run python docs/experiments/session66/qa/fim_completions_probe.py http://localhost:8811
Prints one line per case (status, a cut body); checks a few invariants and prints FAIL lines.
"""
import json, sys, time
import httpx

URL = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8811"
c = httpx.Client(base_url=URL, timeout=120)


def show(name, r):
    print(f"{name:34s} {r.status_code} {r.text[:260]}")
    return r


def wait(tid, limit=120):
    t0 = time.time()
    while time.time() - t0 < limit:
        g = c.get(f"/v1/tasks/{tid}/get_result").json()
        if g["finished"]:
            return g
        time.sleep(0.1)
    return None


# ---- FIM
for name, body in {
    "fim_empty_both": {"prefix": "", "suffix": "", "max_tokens": 5},
    "fim_no_suffix": {"prefix": "def f(x):", "max_tokens": 5},
    "fim_empty_prefix": {"prefix": "", "suffix": "return x", "max_tokens": 5},
    "fim_missing_prefix": {"suffix": "return x", "max_tokens": 5},
    "fim_prefix_null": {"prefix": None, "suffix": "x", "max_tokens": 5},
    "fim_prefix_int": {"prefix": 5, "max_tokens": 5},
    "fim_prefix_tokens": {"prefix": [1, 2, 3], "max_tokens": 5},
    "fim_huge_max": {"prefix": "a", "max_tokens": 10**12},
    "fim_max_neg": {"prefix": "a", "max_tokens": -1},
    "fim_max0": {"prefix": "def f(x):", "suffix": "return", "max_tokens": 0},
    "fim_prompt_field": {"prompt": "x", "prefix": "a", "max_tokens": 3},
    "fim_stop": {"prefix": "a", "max_tokens": 5, "stop": ["\n"]},
    "fim_stream_str": {"prefix": "a", "max_tokens": 3, "stream": "yes"},
    "fim_unicode": {"prefix": "✿prefix✿", "suffix": "✿middle✿", "max_tokens": 3},
}.items():
    r = show(name, c.post("/v1/tasks/fim", json=body))
    if r.status_code == 200 and r.json().get("task_id"):
        g = wait(r.json()["task_id"])
        print(f"{'':34s} -> finished={g and g['finished']} result={g and g['result'][:60]!r}")
    if r.status_code >= 500:
        print("FAIL 5xx", name)

# FIM streaming
with c.stream("POST", "/v1/tasks/fim", json={"prefix": "def f(x):\n", "suffix": "\n", "max_tokens": 8, "stream": True}) as r:
    lines = [l for l in r.iter_lines() if l]
print("fim_stream", r.status_code, lines[:2], lines[-1:])

# ---- completions
def comp(name, **body):
    body.setdefault("model", "rwkv-7")
    r = show(name, c.post("/v1/completions", json=body))
    if r.status_code >= 500:
        print("FAIL 5xx", name)
    return r

comp("empty_prompt", prompt="", max_tokens=3)
comp("empty_list", prompt=[], max_tokens=3)
comp("list_of_empty", prompt=[""], max_tokens=3)
comp("token_ids_oob", prompt=[70000], max_tokens=3)
comp("token_ids_neg", prompt=[-1], max_tokens=3)
comp("nested_ids_empty", prompt=[[]], max_tokens=3)
comp("huge_max", prompt="a", max_tokens=10**15, temperature=0, stop=["\n"])
comp("max_neg", prompt="a", max_tokens=-5)
comp("max0_no_echo", prompt="a", max_tokens=0)
r = comp("echo_max0", prompt="Hello world", max_tokens=0, echo=True)
r = comp("echo_logprobs_max0", prompt="Hello world", max_tokens=0, echo=True, logprobs=2)
if r.status_code == 200:
    lp = r.json()["choices"][0]["logprobs"]
    print("   tokens", lp["tokens"], "offsets", lp["text_offset"], "tlp0", lp["token_logprobs"][:2])
comp("echo_empty_prompt_lp", prompt="", max_tokens=0, echo=True, logprobs=1)
comp("echo_empty_prompt", prompt="", max_tokens=2, echo=True)
comp("logprobs_6", prompt="a", max_tokens=2, logprobs=6)
comp("logprobs_neg", prompt="a", max_tokens=2, logprobs=-1)
comp("logprobs_0", prompt="a", max_tokens=2, logprobs=0)
r = comp("n3", prompt=["a", "b"], max_tokens=3, n=3, temperature=1, seed=5)
if r.status_code == 200:
    print("   indexes", [ch["index"] for ch in r.json()["choices"]], r.json()["usage"])
comp("n0", prompt="a", max_tokens=3, n=0)
comp("n_huge", prompt="a", max_tokens=3, n=100000)
comp("best_of_lt_n", prompt="a", max_tokens=3, n=3, best_of=2)
comp("best_of_stream", prompt="a", max_tokens=3, best_of=2, stream=True)
comp("best_of_ok", prompt="a", max_tokens=3, n=1, best_of=3)
comp("stop_empty_str", prompt="a", max_tokens=5, stop="")
comp("stop_list_empty", prompt="a", max_tokens=5, stop=[])
comp("stop_17", prompt="a", max_tokens=5, stop=[str(i) for i in range(17)])
comp("stop_null_in_list", prompt="a", max_tokens=5, stop=[None])
comp("stop_int", prompt="a", max_tokens=5, stop=5)
comp("suffix_empty", prompt="def f():", suffix="", max_tokens=4)
comp("suffix_echo_lp", prompt="def f():", suffix="x", max_tokens=4, echo=True, logprobs=1)
comp("suffix_n2", prompt="def f():", suffix="x", max_tokens=4, n=2)
comp("temp_neg", prompt="a", max_tokens=2, temperature=-1)
comp("temp_3", prompt="a", max_tokens=2, temperature=3)
comp("top_p_2", prompt="a", max_tokens=2, top_p=2)
comp("seed_str", prompt="a", max_tokens=2, seed="abc")
comp("seed_huge", prompt="a", max_tokens=2, seed=2**70)
comp("seed_neg", prompt="a", max_tokens=2, seed=-1)
comp("model_template_missing", prompt="a", max_tokens=2, model="rwkv-7:_nonexistent")
comp("prompt_dict", prompt={"a": 1}, max_tokens=2)
comp("prompt_float_list", prompt=[1.5, 2], max_tokens=2)
comp("prompt_mixed_list", prompt=["a", 1], max_tokens=2)

# stop sequence is honoured: greedy run, then stop at a substring of its text
r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "The", "max_tokens": 30, "temperature": 0})
full = r.json()["choices"][0]["text"]
if len(full) > 8:
    s = full[5:8]
    r2 = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "The", "max_tokens": 30, "temperature": 0, "stop": [s]})
    t2 = r2.json()["choices"][0]
    ok = t2["text"] == full[:full.index(s)] and t2["finish_reason"] == "stop"
    print("stop honoured:", ok, repr(full[:20]), repr(s), repr(t2["text"]), t2["finish_reason"])
    # stream with the same stop
    with c.stream("POST", "/v1/completions", json={"model": "rwkv-7", "prompt": "The", "max_tokens": 30, "temperature": 0, "stop": [s], "stream": True}) as rs:
        txt, fr = "", None
        for l in rs.iter_lines():
            if l.startswith("data: {"):
                d = json.loads(l[6:])
                if d.get("choices"):
                    txt += d["choices"][0]["text"]; fr = d["choices"][0]["finish_reason"] or fr
    print("stream stop equal:", txt == t2["text"], fr)
    # echo + stop
    r3 = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "The", "max_tokens": 30, "temperature": 0, "stop": [s], "echo": True})
    print("echo+stop:", r3.json()["choices"][0]["text"] == "The" + t2["text"], repr(r3.json()["choices"][0]["text"][:30]))
    # echo + logprobs with generation: token count vs usage
    r4 = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "The cat", "max_tokens": 6, "temperature": 0, "echo": True, "logprobs": 1})
    j = r4.json(); lp = j["choices"][0]["logprobs"]
    print("echo+lp gen:", r4.status_code, "tokens", len(lp["tokens"]), "usage", j["usage"],
          "text==join", "".join(lp["tokens"]) == j["choices"][0]["text"],
          "offsets monotone", lp["text_offset"] == sorted(lp["text_offset"]))
print("health:", c.get("/health").json())
