"""Part 1c: streaming, max_tokens cut, bias+format together, templates, OpenAI x-guidance."""
import json
from h import *

f = open("/tmp/qa46c/qa/t1c_more.out", "w")
P = "User: Give me a JSON record.\n\nAssistant:"


def joined(lines):
    txt, evs = "", []
    for l in lines:
        if l == "[DONE]" or l.startswith("#"):
            evs.append(l)
            continue
        d = json.loads(l)
        evs.append(list(d))
        if "data" in d:
            txt += d["data"]
        if "error" in d:
            evs.append(d)
    return txt, evs


# streaming create/tmp/fim/continue/fork constrained
s, lines = sse("/v1/tasks/create", {"prompt": P, "max_tokens": 200, "seed": 11, "stream": True,
                                    "response_format": RF})
txt, evs = joined(lines)
tid = json.loads(lines[0])["task_id"]
ok, obj, lead = parse_json(txt)
gr = wait(tid)[1]
log(f, "stream create:", ok, lead, repr(txt), "| get_result equal:", gr["result"] == txt,
    gr["finished"], "| last events", evs[-2:], get(f"/v1/tasks/{tid}/status")[1])
# reader stream of the same finished round
s, l2 = sse(f"/v1/tasks/{tid}/stream", None, method="GET")
log(f, "  /stream after:", joined(l2)[0] == txt)
s, lines = sse(f"/v1/tasks/{tid}/continue", {"prompt": "\n\nUser: again\n\nAssistant:",
                                             "max_tokens": 200, "stream": True, "response_format": RF})
txt, evs = joined(lines)
log(f, "stream continue constrained:", parse_json(txt), "| get_result eq:", wait(tid)[1]["result"] == txt)
s, lines = sse(f"/v1/tasks/{tid}/fork?tmp=true", {"prompt": "\n\nUser: again\n\nAssistant:",
                                                  "max_tokens": 200, "stream": True, "response_format": RF_OBJ})
txt, evs = joined(lines)
log(f, "stream fork tmp json_object:", parse_json(txt)[:2], repr(txt[:120]))
s, lines = sse("/v1/tasks/fim", {"prefix": "cfg = ", "suffix": "\n", "max_tokens": 200, "stream": True,
                                 "response_format": RF, "seed": 2})
txt, evs = joined(lines)
log(f, "stream fim:", parse_json(txt), repr(txt))

# max_tokens cutting
for mt in (1, 2, 5, 8):
    tid = post("/v1/tasks/create", {"prompt": P, "max_tokens": mt, "seed": 1, "response_format": RF})[1]["task_id"]
    r = wait(tid)[1]
    log(f, f"max_tokens={mt}: result={r['result']!r} finished={r['finished']} status={get(f'/v1/tasks/{tid}/status')[1]}")
    if mt == 5:
        cut = tid
# continue a cut constrained round without prompt and without format: free
post(f"/v1/tasks/{cut}/continue", {"max_tokens": 20})
log(f, "continue the cut round, free, no prompt:", repr(wait(cut)[1]["result"]))
post(f"/v1/tasks/{cut}/continue", {"max_tokens": 200, "response_format": RF})
log(f, "continue the cut round, no prompt, with format (new grammar from the middle):",
    repr(wait(cut)[1]["result"]))

# bias + format together: force ' ' lead vs ban; push 'true' / 'false'
tokn = {}
import sys; sys.path.insert(0, "/tmp/qa46c"); from server.model.tokenizer import Tokenizer
T = Tokenizer()
for w in ["true", "false", " ", "\n", "{", " {", "\n{", "{\"", ">"]:
    tokn[w] = T.encode(w)
log(f, "tokens:", tokn)
for name, bias in [("ban blanks", {"33": -100, "11": -100}), ("force newline", {"11": 100}),
                   ("force 'false'", {str(T.encode("false")[0]): 100}),
                   ("force 'abc' (not allowed)", {str(T.encode("abc")[0]): 100}),
                   ("ban all '{' tokens", {str(i): -100 for i in range(65536) if T._bytes[i][:1] == b"{" or T._bytes[i][:2] in (b" {", b"\n{")})]:
    for seed in (1, 2):
        s, j = post("/v1/tasks/tmp", {"prompt": P, "max_tokens": 200, "seed": seed, "response_format": RF,
                                      "logit_bias": bias})
        r = wait(j["task_id"])[1] if s == 200 else j
        txt = r["result"] if isinstance(r, dict) else r
        log(f, f"bias+format {name} seed={seed}: {s} parse={parse_json(txt)[:2]} text={txt!r:.150}")

# templates: max_tokens 0 with format -> as_template -> fork with format / without
s, j = post("/v1/tasks/create", {"prompt": P, "max_tokens": 0, "response_format": RF,
                                 "logit_bias": {"33": 50}})
log(f, "template prefill with format:", s, j)
tid = j["task_id"]
s, tpl = post(f"/v1/tasks/{tid}/as_template")
log(f, "as_template:", s, tpl)
tp = tpl["task_id"]
for q in ("", "?tmp=true"):
    for seed in (1, 2):
        fk = post(f"/v1/tasks/{tp}/fork{q}", {"max_tokens": 200, "seed": seed, "response_format": RF})
        r = wait(fk[1]["task_id"])[1]
        log(f, f"fork{q} template with format seed={seed}:", fk[0], parse_json(r["result"]), repr(r["result"]))
    fk = post(f"/v1/tasks/{tp}/fork{q}", {"max_tokens": 30, "seed": 1})
    r = wait(fk[1]["task_id"])[1]
    log(f, f"fork{q} template without format:", parse_json(r["result"])[0], repr(r["result"][:80]))
fk = post(f"/v1/tasks/{tp}/fork", {"seed": 1, "response_format": RF})
log(f, "fork template with format but no max_tokens (inherits 0):", fk, wait(fk[1]["task_id"])[1])
# fork the template stream
s, lines = sse(f"/v1/tasks/{tp}/fork", {"max_tokens": 200, "seed": 3, "stream": True, "response_format": RF})
log(f, "fork template streamed:", parse_json(joined(lines)[0]), repr(joined(lines)[0]))
# continue a template: 403
log(f, "continue template with format:", post(f"/v1/tasks/{tp}/continue", {"response_format": RF}))
json.dump({"tpl": tp}, open("/tmp/qa46c/qa/t1c_ids.json", "w"))

# OpenAI routes with x-guidance non-dict
bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "x-guidance": "abc"}}}
r = C.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "hi"}],
                                        "max_tokens": 5, "response_format": bad})
log(f, "chat x-guidance str:", r.status_code, r.text[:200])
r = C.post("/v1/completions", json={"model": "rwkv-7", "prompt": "hi", "max_tokens": 5, "response_format": bad})
log(f, "completions x-guidance str:", r.status_code, r.text[:200])
tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "x-guidance": "abc"}}}]
r = C.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "hi"}],
                                        "max_tokens": 5, "tools": tools, "tool_choice": "required"})
log(f, "chat tool params x-guidance str:", r.status_code, r.text[:200])
