"""Part 2: OpenAI chat with response_format / forced tool calls."""
import json
from h import *

f = open("/tmp/qa46c/qa/t2_chat.out", "w")
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


# 1. response_format, non-stream vs stream, logprobs
for seed in (1, 2, 3, 4):
    for rf in (RF, RF_OBJ):
        body = {"seed": seed, "response_format": rf, "logprobs": True, "top_logprobs": 2}
        s, j = chat(body)
        if s != 200:
            log(f, "HTTP", s, j); continue
        lp = describe(f"chat rf={rf['type']} seed={seed}", j)
        if j["usage"]["completion_tokens"] != len(lp):
            log(f, "    !! usage.completion_tokens", j["usage"]["completion_tokens"], "!= logprobs", len(lp))
        s, ch = chat({**body, "stream_options": {"include_usage": True}}, stream=True)
        out, usage = merge(ch)
        same = out[0]["content"] == j["choices"][0]["message"]["content"]
        log(f, f"    stream: content equal={same} stream_content={out[0]['content']!r:.100} lp_equal={out[0]['lp'] == lp} "
               f"finish={out[0]['finish']} usage={usage} reasoning={out[0]['reasoning']!r:.30}")
        if usage and usage["completion_tokens"] != len(out[0]["lp"]):
            log(f, "    !! stream usage", usage["completion_tokens"], "!= lp", len(out[0]["lp"]))

# 2. n=3
s, j = chat({"seed": 5, "n": 3, "response_format": RF, "logprobs": True})
describe("chat n=3", j)
s, ch = chat({"seed": 5, "n": 3, "response_format": RF, "logprobs": True,
              "stream_options": {"include_usage": True}}, stream=True)
out, usage = merge(ch, 3)
for i in range(3):
    log(f, f"    stream n=3 [{i}] equal={out[i]['content'] == j['choices'][i]['message']['content']} {out[i]['content']!r:.80}")
log(f, "    stream n=3 usage", usage, "sum lp", sum(len(o["lp"]) for o in out))

# 3. stop strings with format
for stop in ([","], ['"n"'], [">"], [" "], ["{"], ["\n"], ["}"]):
    for seed in (1, 3):
        s, j = chat({"seed": seed, "response_format": RF, "logprobs": True, "stop": stop})
        if s != 200:
            log(f, "stop", stop, s, j); continue
        describe(f"stop={stop} seed={seed}", j)
        s, ch = chat({"seed": seed, "response_format": RF, "stop": stop}, stream=True)
        out, _ = merge(ch)
        log(f, f"    stream equal={out[0]['content'] == j['choices'][0]['message']['content']} {out[0]['content']!r}")

# 4. max_tokens cut
for mt in (1, 2, 3, 6):
    s, j = chat({"seed": 1, "response_format": RF, "logprobs": True, "max_tokens": mt})
    describe(f"max_tokens={mt}", j)
    s, ch = chat({"seed": 1, "response_format": RF, "max_tokens": mt, "stream_options": {"include_usage": True}}, stream=True)
    out, usage = merge(ch)
    log(f, f"    stream equal={out[0]['content'] == j['choices'][0]['message']['content']} {out[0]['content']!r} finish={out[0]['finish']} usage={usage}")

# 5. forced tool calls
for tc in ("required", {"type": "function", "function": {"name": "get_weather"}},
           {"type": "function", "function": {"name": "noop"}}):
    for seed in (1, 2, 3):
        body = {"seed": seed, "tools": TOOLS, "tool_choice": tc, "logprobs": True}
        s, j = chat(body)
        if s != 200:
            log(f, "tool", tc, s, j); continue
        lp = describe(f"tool_choice={json.dumps(tc)[:60]} seed={seed}", j)
        for call in j["choices"][0]["message"].get("tool_calls") or []:
            ok, obj, lead = parse_json(call["function"]["arguments"])
            log(f, f"    call {call['function']['name']} args parse={ok} lead={lead} {obj}")
        if j["usage"]["completion_tokens"] != len(lp):
            log(f, "    !! usage", j["usage"]["completion_tokens"], "!= lp", len(lp))
        s, ch = chat({**body, "stream_options": {"include_usage": True}}, stream=True)
        out, usage = merge(ch)
        nst = j["choices"][0]["message"]
        same = ([(t["name"], t["arguments"]) for t in out[0]["tool"].values()] ==
                [(t["function"]["name"], t["function"]["arguments"]) for t in nst.get("tool_calls") or []])
        log(f, f"    stream calls equal={same} content={out[0]['content']!r} finish={out[0]['finish']} usage={usage} lp={len(out[0]['lp'])} lp_eq={out[0]['lp'] == lp}")
# forced call with stop and n=3
s, j = chat({"seed": 4, "n": 3, "tools": TOOLS, "tool_choice": "required", "logprobs": True, "stop": [","]})
describe("tool required n=3 stop=','", j)
