"""Part 3: /v1/completions with response_format."""
import json
from h import *

f = open("/tmp/qa46c/qa/t3_completions.out", "w")
P = "User: Give me a JSON record.\n\nAssistant:"


def comp(body, stream=False):
    body = {"model": "rwkv-7", "max_tokens": 200, **body}
    if not stream:
        r = C.post("/v1/completions", json=body)
        try:
            return r.status_code, r.json()
        except Exception:
            return r.status_code, r.text
    body["stream"] = True
    chunks = []
    with C.stream("POST", "/v1/completions", json=body) as r:
        if r.status_code != 200:
            return r.status_code, r.read().decode()
        for line in r.iter_lines():
            if line.startswith("data: "):
                d = line[6:]
                chunks.append(d if d == "[DONE]" else json.loads(d))
    return 200, chunks


def merge(chunks, n):
    txt = [""] * n
    fin = [None] * n
    lp = [[] for _ in range(n)]
    usage = None
    for c in chunks:
        if c == "[DONE]":
            continue
        if c.get("usage"):
            usage = c["usage"]
        for ch in c.get("choices", []):
            txt[ch["index"]] += ch.get("text") or ""
            if ch.get("finish_reason"):
                fin[ch["index"]] = ch["finish_reason"]
            if ch.get("logprobs"):
                lp[ch["index"]] += ch["logprobs"].get("tokens") or []
    return txt, fin, lp, usage


def show(label, body, prompt_text=None, n=1):
    s, j = comp(body)
    if s != 200:
        log(f, label, "HTTP", s, str(j)[:300]); return
    for ch in j["choices"]:
        t = ch["text"]
        body_txt = t
        if prompt_text is not None and t.startswith(prompt_text):
            body_txt = t[len(prompt_text):]
        lpt = (ch.get("logprobs") or {}).get("tokens")
        log(f, f"{label} [{ch['index']}] finish={ch['finish_reason']} text={t!r:.160} parse(after echo)={parse_json(body_txt)[:2]}"
               f" lp_n={len(lpt) if lpt else None} first_lp={lpt[:3] if lpt else None}")
    log(f, "    usage", j.get("usage"))
    s, ch = comp({**body, "stream_options": {"include_usage": True}}, stream=True)
    if s != 200:
        log(f, "    stream HTTP", s, ch); return
    txt, fin, lp, usage = merge(ch, len(j["choices"]))
    eq = [txt[i] == j["choices"][i]["text"] for i in range(len(txt))]
    log(f, f"    stream equal={eq} fin={fin} usage={usage}")
    return j


for seed in (1, 2, 3):
    j = show(f"plain seed={seed}", {"prompt": P, "seed": seed, "response_format": RF, "logprobs": 1})
    if j:
        u = j["usage"]["completion_tokens"]
        n = len(j["choices"][0]["logprobs"]["tokens"])
        if u != n:
            log(f, "    !! usage", u, "!= logprobs", n)
show("json_object", {"prompt": P, "seed": 1, "response_format": RF_OBJ, "max_tokens": 30})
show("echo", {"prompt": P, "seed": 1, "response_format": RF, "echo": True}, prompt_text=P)
j = show("echo+logprobs", {"prompt": P, "seed": 1, "response_format": RF, "echo": True, "logprobs": 1}, prompt_text=P)
if j:
    lp = j["choices"][0]["logprobs"]
    log(f, "    echo lp tokens first:", lp["tokens"][:3], "n", len(lp["tokens"]), "usage", j["usage"])
show("echo+max_tokens0", {"prompt": P, "seed": 1, "response_format": RF, "echo": True, "max_tokens": 0, "logprobs": 1}, prompt_text=P)
show("suffix", {"prompt": "config = ", "suffix": "\nprint(config)", "seed": 1, "response_format": RF})
show("suffix empty", {"prompt": "config = ", "suffix": "", "seed": 2, "response_format": RF})
show("suffix+echo", {"prompt": "config = ", "suffix": "\n", "seed": 2, "response_format": RF, "echo": True}, prompt_text="config = ")
show("prompt list", {"prompt": [P, "User: another\n\nAssistant:"], "seed": 1, "response_format": RF})
show("prompt list n=2", {"prompt": [P, "User: another\n\nAssistant:"], "seed": 1, "n": 2, "response_format": RF})
show("token id prompt", {"prompt": [33, 34, 35], "seed": 1, "response_format": RF})
show("token id list of lists", {"prompt": [[33, 34], [35, 36]], "seed": 1, "response_format": RF})
show("prompt list + echo", {"prompt": [P, "Q:"], "seed": 1, "response_format": RF, "echo": True})
show("n=3 best_of 3", {"prompt": P, "seed": 1, "n": 3, "best_of": 3, "response_format": RF})
show("stop ','", {"prompt": P, "seed": 1, "response_format": RF, "stop": [","]})
show("stop ' '", {"prompt": P, "seed": 1, "response_format": RF, "stop": [" "]})
show("max_tokens 1", {"prompt": P, "seed": 1, "response_format": RF, "max_tokens": 1, "logprobs": 0})
show("logit_bias+rf", {"prompt": P, "seed": 1, "response_format": RF, "logit_bias": {"11": 100}})
show("prompt ending with space", {"prompt": "JSON: ", "seed": 1, "response_format": RF})
show("prompt ending with '{'", {"prompt": "JSON: {", "seed": 1, "response_format": RF})
show("template model", {"model": "rwkv-7:_nonexistent", "prompt": P, "seed": 1, "response_format": RF})
