"""Property-based fuzz of the OpenAI routes and Task API create: random JSON in every field, and
random JSON-Schemas for response_format / tool parameters. Property: no 5xx, no reply slower than
30 s, 4xx in the route's error shape. max_tokens kept <= 6."""
import json, sys, time, httpx
from hypothesis import given, settings, strategies as st, HealthCheck, Phase
B = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8792"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 300
VALID = len(sys.argv) > 3 and sys.argv[3] == "valid"
c = httpx.Client(base_url=B, timeout=35)
fails = []
scalars0 = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
scalars = scalars0
jsonv = st.nothing() if VALID else st.recursive(scalars0, lambda ch: st.lists(ch, max_size=4) | st.dictionaries(st.text(max_size=8), ch, max_size=4), max_leaves=12)
pattern = st.lists(st.sampled_from(["a", "b", ".", "\\d", "\\w", "[a-z]", "(", ")", "|", "*", "+", "?", "{0,50}", "{2,3}", "^", "$", "[^\"]", "\\s"]), max_size=8).map("".join)
def schema_st():
    leaf = st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "boolean", "null"])},
            optional={"minimum": st.integers(-10, 10), "maximum": st.integers(-10, 100), "minLength": st.integers(0, 2000), "maxLength": st.integers(0, 5000),
                      "pattern": pattern, "format": st.sampled_from(["date-time", "email", "uuid", "date", "time", "uri", "ipv4"]), "multipleOf": st.sampled_from([1, 2, 0.5, 3])}),
        st.fixed_dictionaries({"enum": st.lists(scalars0, min_size=0, max_size=5)}), st.fixed_dictionaries({"const": scalars0}),
        st.just({"$ref": "#"}), st.just({}), st.just(True), st.just(False))
    return st.recursive(leaf, lambda ch: st.one_of(
        st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(st.text(min_size=1, max_size=5), ch, max_size=4)},
                              optional={"required": st.lists(st.text(min_size=1, max_size=5), max_size=3), "additionalProperties": st.one_of(st.booleans(), ch), "minProperties": st.integers(0, 5)}),
        st.fixed_dictionaries({"type": st.just("array"), "items": ch}, optional={"minItems": st.integers(0, 50), "maxItems": st.integers(0, 50), "uniqueItems": st.booleans()}),
        st.fixed_dictionaries({"anyOf": st.lists(ch, min_size=1, max_size=3)}), st.fixed_dictionaries({"oneOf": st.lists(ch, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"allOf": st.lists(ch, min_size=1, max_size=2)})), max_leaves=8)
schemas = schema_st()
def rf_st():
    return st.one_of(st.just(None), jsonv, st.builds(lambda s, strict: {"type": "json_schema", "json_schema": {"name": "x", "schema": s, "strict": strict}}, schemas, st.booleans()), st.just({"type": "json_object"}))
fields = {"temperature": st.one_of(jsonv, st.floats(0, 2)), "top_p": st.one_of(jsonv, st.floats(0, 1)), "top_k": st.one_of(jsonv, st.integers(-1, 100)), "min_p": st.one_of(jsonv, st.floats(0, 1)),
          "presence_penalty": st.one_of(jsonv, st.floats(-2, 10)), "frequency_penalty": st.one_of(jsonv, st.floats(-2, 10)), "penalty_decay": st.floats(0, 1), "seed": st.one_of(jsonv, st.integers()),
          "n": st.one_of(jsonv, st.integers(1, 4)), "stop": st.one_of(jsonv, st.text(max_size=3), st.lists(st.text(max_size=3), max_size=4)), "stream": st.one_of(jsonv, st.booleans()),
          "stream_options": st.one_of(jsonv, st.fixed_dictionaries({"include_usage": st.booleans()})), "logit_bias": st.one_of(jsonv, st.dictionaries(st.integers(0, 70000).map(str), st.floats(-150, 150), max_size=4)),
          "response_format": rf_st(), "user": st.text(max_size=5), "model": st.one_of(jsonv, st.sampled_from(["rwkv-7", "rwkv-7:_nope", "gpt-4o"]))}
chat_extra = {"reasoning_effort": st.one_of(jsonv, st.sampled_from(["none", "low", "high"])), "logprobs": st.one_of(jsonv, st.booleans()), "top_logprobs": st.one_of(jsonv, st.integers(0, 20)),
              "tools": st.one_of(jsonv, st.lists(st.builds(lambda nm, p: {"type": "function", "function": {"name": nm, "parameters": p}}, st.text(min_size=1, max_size=6), schemas), min_size=1, max_size=3)),
              "tool_choice": st.one_of(jsonv, st.sampled_from(["auto", "required", "none"])), "parallel_tool_calls": st.one_of(jsonv, st.booleans())}
comp_extra = {"echo": st.one_of(jsonv, st.booleans()), "suffix": st.one_of(jsonv, st.text(max_size=5)), "best_of": st.one_of(jsonv, st.integers(1, 4)), "logprobs": st.one_of(jsonv, st.integers(0, 5))}
msg = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool", "developer"]), "content": st.one_of(st.text(max_size=30), st.none(), st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}), max_size=2), jsonv)})
def body_st(extra, base):
    return st.fixed_dictionaries(base, optional={**fields, **extra}).map(lambda d: {**d, "max_tokens": 6})
chat_body = body_st(chat_extra, {"messages": st.one_of(st.lists(msg, min_size=1, max_size=3), jsonv)})
comp_body = body_st(comp_extra, {"prompt": st.one_of(st.text(max_size=30), st.lists(st.integers(-5, 70000), max_size=5), st.lists(st.text(max_size=5), max_size=3), jsonv)})
task_fields = {k: v for k, v in fields.items() if k in ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "seed", "stream", "logit_bias", "response_format", "penalty_decay")}
task_body = st.fixed_dictionaries({"prompt": st.one_of(st.text(min_size=1, max_size=30), st.lists(st.integers(0, 65535), min_size=1, max_size=5))}, optional={**task_fields, "repetition_penalty": st.floats(0, 10)}).map(lambda d: {**d, "max_tokens": 6})
def check(path, body):
    t = time.time()
    try:
        r = c.post(path, content=json.dumps(body, allow_nan=False).encode(), headers={"content-type": "application/json"})
    except httpx.TimeoutException:
        fails.append((path, "TIMEOUT", body)); print("TIMEOUT", path, json.dumps(body)[:300], flush=True); return
    dt = time.time() - t
    txt = r.text
    bad = None
    if r.status_code >= 500: bad = "5xx"
    elif dt > 30: bad = "slow"
    elif r.status_code >= 400:
        j = r.json()
        if path.startswith("/v1/tasks"):
            if "detail" not in j: bad = "shape"
        elif not (isinstance(j.get("error"), dict) and set(j["error"]) >= {"message", "type", "param", "code"}): bad = "shape"
    elif r.headers.get("content-type", "").startswith("text/event-stream") and '"error"' in txt:
        if path.startswith("/v1/tasks"): bad = "stream-error" if "generation_error" in txt or "error" in txt else None
        else: bad = "stream-error"
    elif path.startswith("/v1/tasks") and r.status_code == 200 and not body.get("stream"):
        tid = r.json()["task_id"]
        for _ in range(40):
            g = c.get(f"/v1/tasks/{tid}/get_result")
            if g.status_code >= 500: bad = "task-5xx"; txt = g.text; break
            if g.json().get("finished"): break
            time.sleep(0.25)
    if bad:
        fails.append((path, bad, r.status_code, txt[:300], body))
        print(bad, path, r.status_code, txt[:200].replace("\n", " "), "BODY", json.dumps(body)[:600], flush=True)
S = settings(max_examples=N, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate], database=None)
@S
@given(chat_body)
def t_chat(b): check("/v1/chat/completions", b)
@S
@given(comp_body)
def t_comp(b): check("/v1/completions", b)
@S
@given(task_body)
def t_task(b): check("/v1/tasks/tmp", b)
for fn in (t_chat, t_comp, t_task):
    t0 = time.time(); fn(); print(fn.__name__, "done", f"{time.time()-t0:.0f}s", flush=True)
print("FAILS", len(fails))
