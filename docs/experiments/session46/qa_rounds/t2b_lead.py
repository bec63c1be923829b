"""Part 2: OpenAI chat with response_format / forced tool calls."""
import json
from h import *

f = open("/tmp/qa46c/qa/t2b_lead.out", "w")
BL = " \n"
MSG = [{"role": "user", "content": "Give me a record as JSON."}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"], "additionalProperties": False}}},
         {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}]


def chat(body, stream=False):
    body = {"model": "rwkv-7", "messages": MSG, "max_tokens": 200, **body}
    if not stream:
        r = C.post("/v1/chat/completions", json=body)
        return r.status_code, r.json()
    body["stream"] = True
    chunks = []
    with C.stream("POST", "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            return r.status_code, r.read().decode()
        for line in r.iter_lines():
            if line.startswith("data: "):
                d = line[6:]
                chunks.append(d if d == "[DONE]" else json.loads(d))
    return 200, chunks


def merge(chunks, n=1):
    out = [{"content": "", "reasoning": "", "lp": [], "finish": None, "tool": {}} for _ in range(n)]
    usage = None
    for c in chunks:
        if c == "[DONE]":
            continue
        if c.get("usage"):
            usage = c["usage"]
        for ch in c.get("choices", []):
            o = out[ch["index"]]
            d = ch.get("delta", {})
            o["content"] += d.get("content") or ""
            o["reasoning"] += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                t = o["tool"].setdefault(tc["index"], {"name": "", "arguments": "", "id": None})
                fn = tc.get("function") or {}
                t["name"] += fn.get("name") or ""
                t["arguments"] += fn.get("arguments") or ""
                t["id"] = t["id"] or tc.get("id")
            if ch.get("logprobs") and ch["logprobs"].get("content"):
                o["lp"] += [e["token"] for e in ch["logprobs"]["content"]]
            if ch.get("finish_reason"):
                o["finish"] = ch["finish_reason"]
    return out, usage


def describe(label, j):
    for ch in j["choices"]:
        m = ch["message"]
        lp = [e["token"] for e in (ch.get("logprobs") or {}).get("content") or []]
        c = m.get("content")
        log(f, f"{label} [{ch['index']}] finish={ch['finish_reason']} content={c!r:.140} "
               f"reasoning={m.get('reasoning_content')!r:.40} tool_calls={json.dumps(m.get('tool_calls'))[:200]}")
        log(f, f"    first lp tokens={lp[:4]} n_lp={len(lp)} starts '>'={bool(lp) and lp[0].startswith('>')}"
               f" content-parse={parse_json(c)[:2] if c else None}"
               f" content_starts_blank={bool(c) and c[:1] in BL}")
    log(f, f"    usage={j.get('usage')}")
    return lp



import sys
sys.path.insert(0, "/tmp/qa46c")
from server.model.tokenizer import Tokenizer
T = Tokenizer()
gt = [i for i, b in enumerate(T._bytes) if b[:1] == b">"]
log(f, "tokens starting with '>':", [(i, T._bytes[i]) for i in gt][:40])
# ban every '>'-token except the bare '>' (63): the lead is then '>' alone, then a blank can follow
ban = {str(i): -100 for i in gt if i != 63}
for blank, tid in ((" ", 33), ("\n", 11)):
    for label, extra in (("rf", {"response_format": RF}),
                         ("tool", {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})):
        bias = dict(ban); bias[str(tid)] = 100
        body = {"seed": 1, "logprobs": True, "logit_bias": bias, **extra}
        s, j = chat(body)
        if s != 200:
            log(f, "HTTP", s, j); continue
        lp = describe(f"blank={blank!r} {label}", j)
        log(f, "    lp tokens:", lp[:6])
        s, ch = chat({**body, "stream_options": {"include_usage": True}}, stream=True)
        out, usage = merge(ch)
        log(f, f"    stream content={out[0]['content']!r:.80} equal={out[0]['content'] == (j['choices'][0]['message']['content'] or '')} lp_eq={out[0]['lp'] == lp} usage={usage}")
        # first chunk content deltas
        firsts = [c["choices"][0]["delta"] for c in ch if c != "[DONE]" and c.get("choices")][:4]
        log(f, "    first deltas:", json.dumps(firsts, ensure_ascii=False)[:300])
# many seeds at temperature 2: does a blank ever lead naturally, and what does content look like
cnt = {}
for seed in range(40):
    s, j = chat({"seed": seed, "temperature": 2.0, "top_p": 1, "top_k": 0, "logprobs": True, "response_format": RF, "max_tokens": 60})
    ch = j["choices"][0]
    lp = [e["token"] for e in ch["logprobs"]["content"]]
    c = ch["message"]["content"]
    key = (lp[0], c[:1] if c else None)
    cnt[str(key)] = cnt.get(str(key), 0) + 1
    if c and c[:1] != "{":
        log(f, "content not starting with '{':", seed, repr(c[:60]), lp[:3])
    if not lp[0].startswith(">"):
        log(f, "first token not '>':", seed, lp[:3])
log(f, "first token / content[0] counts:", cnt)
