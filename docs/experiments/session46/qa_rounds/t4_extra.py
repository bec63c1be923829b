"""Part 4: extras: stop on a blank lead, cut forced calls, template chat, concurrency, /stop."""
import json, threading, time
from h import *

f = open("/tmp/qa46c/qa/t4_extra.out", "w")
MSG = [{"role": "user", "content": "Give me a record as JSON."}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
    "required": ["city"], "additionalProperties": False}}}]


def chat(body):
    r = C.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": MSG, "max_tokens": 200, **body})
    return r.status_code, r.json()


ban = {str(i): -100 for i in [779, 780, 781, 782, 783, 784, 785, 786, 787, 788, 789, 790, 791, 792, 793,
                              794, 795, 796, 797, 5430, 5431, 5432, 5433, 5434, 5435, 5436, 5437, 5438,
                              5439, 5440, 5441, 23346, 23347]}
for stop in ([" "], ["\n"]):
    bias = {**ban, "33" if stop == [" "] else "11": 100}
    s, j = chat({"seed": 1, "response_format": RF, "logit_bias": bias, "stop": stop, "logprobs": True})
    ch = j["choices"][0]
    log(f, f"chat lead blank forced + stop={stop!r}: finish={ch['finish_reason']} content={ch['message']['content']!r} "
           f"lp={[e['token'] for e in ch['logprobs']['content']][:5]} usage={j['usage']}")
# forced call cut by max_tokens
for mt in (1, 3, 8, 15):
    s, j = chat({"seed": 1, "tools": TOOLS, "tool_choice": "required", "max_tokens": mt})
    ch = j["choices"][0]
    log(f, f"forced call max_tokens={mt}: {s} finish={ch['finish_reason']} content={ch['message'].get('content')!r} tool_calls={ch['message'].get('tool_calls')}")
# response_format with reasoning_effort high (thinking asked): no reasoning
s, j = chat({"seed": 1, "response_format": RF, "reasoning_effort": "high"})
log(f, "rf + reasoning_effort high:", j["choices"][0]["message"], j["usage"])
# response_format + tools with tool_choice none (allowed?) and auto (400)
for tc in ("none", "auto", None):
    b = {"seed": 1, "response_format": RF, "tools": TOOLS}
    if tc:
        b["tool_choice"] = tc
    s, j = chat(b)
    log(f, f"rf + tools tool_choice={tc}: {s} {str(j)[:200]}")
# chat from a template state with response_format
tid = post("/v1/tasks/create", {"prompt": "System: You answer in JSON.\n\n", "max_tokens": 0})[1]["task_id"]
s, tp = post(f"/v1/tasks/{tid}/as_template?name=qajson")
log(f, "template:", s, tp.get("task_id") if isinstance(tp, dict) else tp)
s, j = chat({"model": "rwkv-7:_qajson", "seed": 1, "response_format": RF, "logprobs": True})
log(f, "chat from template + rf:", s, j["choices"][0]["message"] if s == 200 else j)
r = C.post("/v1/completions", json={"model": "rwkv-7:_qajson", "prompt": "User: x\n\nAssistant:", "seed": 1,
                                    "response_format": RF, "max_tokens": 100})
log(f, "completion from template + rf:", r.status_code, r.json()["choices"][0]["text"] if r.status_code == 200 else r.text)
# concurrency: 12 constrained + 12 free task rounds at once vs alone
P = "User: Give me a JSON record.\n\nAssistant:"
alone = {}
for seed in range(6):
    t = post("/v1/tasks/tmp", {"prompt": P, "max_tokens": 120, "seed": seed, "response_format": RF})[1]["task_id"]
    alone[seed] = wait(t)[1]["result"]
ids = []
for seed in range(6):
    ids.append(("c", seed, post("/v1/tasks/tmp", {"prompt": P, "max_tokens": 120, "seed": seed, "response_format": RF})[1]["task_id"]))
    ids.append(("f", seed, post("/v1/tasks/tmp", {"prompt": P, "max_tokens": 120, "seed": seed})[1]["task_id"]))
    ids.append(("o", seed, post("/v1/tasks/tmp", {"prompt": P, "max_tokens": 120, "seed": seed, "response_format": RF_OBJ})[1]["task_id"]))
bad = 0
for kind, seed, t in ids:
    r = wait(t)[1]["result"]
    if kind == "c":
        same = r == alone[seed]
        ok = parse_json(r)[0] and check_schema(parse_json(r)[1])
        if not (same and ok):
            bad += 1
            log(f, "concurrent constrained differs/invalid:", seed, repr(r), repr(alone[seed]))
log(f, "concurrency: mismatches", bad, "of 6")
# /stop a constrained round mid-way (json_object key runs long), then continue
t = post("/v1/tasks/create", {"prompt": P, "max_tokens": 3000, "seed": 3, "response_format": RF_OBJ})[1]["task_id"]
time.sleep(0.5)
s, j = post(f"/v1/tasks/{t}/stop")
log(f, "stop constrained round:", s, j, repr(get(f"/v1/tasks/{t}/get_result")[1]["result"][:60]))
post(f"/v1/tasks/{t}/continue", {"max_tokens": 10})
log(f, "continue after stop, free:", repr(wait(t)[1]["result"]))
post(f"/v1/tasks/{t}/continue", {"prompt": "\n\nUser: j\n\nAssistant:", "max_tokens": 200, "response_format": RF})
r = wait(t)[1]["result"]
log(f, "continue constrained after:", parse_json(r)[:2])
# stream tmp constrained, client disconnects after first event: task stops; other readers end
with C.stream("POST", "/v1/tasks/tmp", json={"prompt": P, "max_tokens": 3000, "seed": 4, "stream": True,
                                             "response_format": RF_OBJ}) as r:
    it = r.iter_lines()
    first = next(it)
    tid = json.loads(first[5:])["task_id"]
time.sleep(1.0)
log(f, "after disconnect:", get(f"/v1/tasks/{tid}/status"))
log(f, "health:", get("/health")[1]["active"], get("/health")[1]["queue"])
