"""Constrained decoding (Task.constraint, server/scheduler/guide.py; OpenAI's response_format), on
the CPU with the tiny random model: whatever its random logits, a constrained reply is JSON that
matches its schema, ends at end-of-text once complete, and every token it took was allowed at
its step (a fresh grammar state replays the reply); rows beside it are untouched."""

import json

import pytest
from loguru import logger
from constrained_cases import SCHEMA, check_schema_reply, replays
from openai_helpers import http, server, sse_lines, stream_chunks  # noqa: F401 (fixtures)
from test_api_openai import assert_error, assert_refused_on_both

from server.scheduler import DynamicScheduler
from server.task.constraint import Constraint, json_grammar, lark_grammar


def constrained(sched, loader, prompt, grammar, max_tokens, seed, **kw):
    task = sched.new_task(list(prompt), max_tokens=max_tokens, temperature=1.0, top_k=0,
                          top_p=1.0, seed=seed, **kw)
    task.constraint = Constraint(grammar, loader.tokenizer)
    return task


def test_schema_replies_are_json_matching_it_beside_free_rows(tiny_loader):
    """Sampled rows under a schema (hot, top-k off: the random model would write anything)
    end at end-of-text with JSON matching it; a row lifting a token the grammar refuses
    (logit_bias +100) still follows the grammar; greedy rows beside them reply as alone;
    the batch shrinks as rows end (slots move)."""
    grammar = json_grammar(SCHEMA)
    prompts = [tiny_loader.encode(f"User: item {i}\n\nAssistant:") for i in range(5)]
    alone = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=3)
    solo = [alone.new_task(list(p), max_tokens=4 + 3 * i, temperature=0.0)
            for i, p in enumerate(prompts[:2])]
    alone.run()
    sched = DynamicScheduler(tiny_loader, max_batch_size=8, buffer_size=3)
    free = [sched.new_task(list(p), max_tokens=4 + 3 * i, temperature=0.0)
            for i, p in enumerate(prompts[:2])]
    rows = [constrained(sched, tiny_loader, p, grammar, 80, seed=i)
            for i, p in enumerate(prompts[2:])]
    rows[0].logit_bias = {tiny_loader.encode("x")[0]: 100.0}
    sched.run()
    assert [t.output for t in free] == [t.output for t in solo]
    for task in rows:
        assert task.finish_reason == "stop", task.finish_reason  # end-of-text, not the length
        check_schema_reply(json.loads(tiny_loader.decode(task.output)))
        assert replays(tiny_loader, grammar, task.output)
    assert min(p["cap"] for p in sched.pulses) < max(p["cap"] for p in sched.pulses)


def test_a_reply_cut_by_max_tokens_is_a_prefix_the_grammar_allowed(tiny_loader):
    grammar = json_grammar({"type": "object", "required": ["s"],  # (no 12 tokens finish it)
                            "properties": {"s": {"type": "string", "minLength": 400}}})
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    task = constrained(sched, tiny_loader, tiny_loader.encode("User: hi\n\nAssistant:"),
                       grammar, 12, seed=3)
    sched.run()
    assert task.finish_reason == "length" and len(task.output) == 12
    assert tiny_loader.decode(task.output).lstrip(" \n").startswith("{")
    assert replays(tiny_loader, grammar, task.output)


def test_a_continued_round_is_free_unless_given_a_grammar_again(tiny_loader):
    """A grammar's state is its round's: dropped when the round finishes, and continue_gen
    clears one set meanwhile (a complete grammar allows only end-of-text: the next round
    would end at once)."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=4)
    grammar = json_grammar(SCHEMA)
    task = constrained(sched, tiny_loader, [5, 6, 7], grammar, 80, seed=1)
    held = task.constraint
    sched.run()
    assert task.finish_reason == "stop" and held.complete and task.constraint is None
    task.constraint = held
    task.continue_gen(" more", max_tokens=5)
    assert task.constraint is None
    sched.add_task(task)
    sched.run()
    assert len(task.output) == 5


class _Faulty:
    """A grammar engine's matcher that raises once it has taken ``after`` tokens (in
    ``method``), else does what the real one does."""

    def __init__(self, real, method: str, after: int):
        self.real, self.method, self.after, self.taken = real, method, after, 0

    def consume_token(self, token):
        if self.method == "consume_token" and self.taken >= self.after:
            raise RuntimeError("injected fault")
        self.taken += 1
        return self.real.consume_token(token)

    def unsafe_compute_mask_ptr(self, *args):
        if self.method == "mask" and self.taken >= self.after:
            raise RuntimeError("injected fault")
        return self.real.unsafe_compute_mask_ptr(*args)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.parametrize("method", ["mask", "consume_token"])
def test_a_grammar_engine_fault_ends_its_row_alone(tiny_loader, method):
    """The grammar engine raising on one row (its mask, or taking a token; with other rows'
    masks due in the same call: llguidance's thread pool refuses the stand-in matcher too)
    ends that row at end-of-text with what it had, as an error naming the fault (its text
    does not follow the grammar to its end: not a reply to hand out as complete); the
    pulse's other rows, constrained or free, reply as they do without it."""
    grammar = json_grammar(SCHEMA)
    prompts = [tiny_loader.encode(f"User: item {i}\n\nAssistant:") for i in range(3)]

    def run(fault: bool):
        sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=3)
        free = sched.new_task(list(prompts[0]), max_tokens=12, temperature=0.0)
        rows = [constrained(sched, tiny_loader, p, grammar, 80, seed=i)
                for i, p in enumerate(prompts[1:])]
        if fault:
            rows[1].constraint._matcher = _Faulty(rows[1].constraint._matcher, method, 4)
        sched.run()
        return free, rows

    free, rows = run(fault=True)
    clean_free, clean_rows = run(fault=False)
    assert free.output == clean_free.output and rows[0].output == clean_rows[0].output
    broken = rows[1]
    assert broken.finish_reason == "error"  # (the 5th token: no mask, or taken but not told)
    assert "could not follow its grammar" in broken.error and "injected fault" in broken.error
    assert all(t.finish_reason != "error" for t in (free, *rows[:1]))
    assert len(broken.output) == (4 if method == "mask" else 5)
    assert broken.output == clean_rows[1].output[:len(broken.output)]


def test_a_constrained_task_being_prefilled_costs_decoding_rows_nothing(tiny_loader,
                                                                        monkeypatch):
    """Pulses while a constrained task's long prompt is fed (a pass per scheduler step) guide
    no row: its grammar acts once it decodes (on CUDA each guided step waits for the device).
    (Session 47's review: 7 of 10 pulses guided the row being prefilled.)"""
    import server.scheduler.engine as engine

    seen = []

    class Spy(engine.Guide):
        def __init__(self, constraints, *args, **kw):
            seen.append((sorted(constraints), sorted(sched.engine._running)))
            super().__init__(constraints, *args, **kw)

    monkeypatch.setattr(engine, "Guide", Spy)
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    free = sched.new_task(tiny_loader.encode("hello"), max_tokens=40, temperature=0.0)
    long = sched.new_task([5 + i % 1000 for i in range(4000)], max_tokens=6, temperature=0.0)
    long.constraint = Constraint(json_grammar(None), tiny_loader.tokenizer)
    sched.run()
    assert len(free.output) == 40 and len(long.output) == 6
    assert seen and all(set(rows) <= set(running) for rows, running in seen), seen
    assert replays(tiny_loader, json_grammar(None), long.output)


def test_without_the_constraint_the_same_rows_break_the_grammar(tiny_loader):
    """(The checks above could not pass by chance: the same sampled rows unconstrained.)"""
    grammar = json_grammar(SCHEMA)
    sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=3)
    tasks = [sched.new_task(list(tiny_loader.encode(f"User: item {i}\n\nAssistant:")),
                            max_tokens=20, temperature=1.0, top_k=0, top_p=1.0, seed=i)
             for i in range(3)]
    sched.run()
    assert not any(replays(tiny_loader, grammar, t.output) for t in tasks)


@pytest.mark.parametrize("fmt,words", [
    ({"type": "xml"}, "not supported"),
    ({}, "not supported"),
    ({"type": "json_schema"}, "needs a \"json_schema\" object"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": [1]}}, "must be a JSON"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}},
     "cannot be used"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "x-guidance": "abc"}}}, "x-guidance must be an object"),
    ("json", None),
])
def test_unusable_response_formats_are_400s(http, fmt, words):
    assert_refused_on_both(http, "response_format", fmt, words)


_SELF = {"$ref": "#"}  # a schema that is only a reference to itself: no JSON text matches
_ENDLESS = {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}
FAILING_SCHEMAS = [  # the grammar engine takes each, then fails a few tokens into a reply
    (_SELF, "NoExtensionBias"),
    ({"anyOf": [_SELF, _SELF]}, "NoExtensionBias"),
    (_ENDLESS, "Too many items"),
    ({"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string", "pattern": "(.{0,10}){100}"}}}, "too many expressions"),
    ({"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}},
                 "required": [f"k{i}"], "additionalProperties": False}
                for i in range(2100)]}, "max is 2000")]


@pytest.mark.parametrize("schema,words", FAILING_SCHEMAS)
def test_a_schema_no_reply_can_follow_is_a_400(http, schema, words):
    """Such a schema was taken, then failed its reply (a 500 quoting the parser's state, and
    nothing logged; a fuzzing helper, session 49): ``Constraint.probe`` walks a few tokens of
    a reply when the request comes, and finds the fault."""
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    for path, body in (("/v1/completions", {"prompt": "x"}), ("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "x"}]})):
        err = assert_error(http.post(path, json={**body, "response_format": fmt}), 400,
                           param="response_format")
        assert "no reply can follow it" in err["message"] and words in err["message"] \
            and "\n" not in err["message"], err["message"]


TREE = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}}
PASSING_SCHEMAS = [  # recursive but finite, or large: the probe must take them
    TREE,
    {"$defs": {"node": {"type": ["object", "null"], "required": ["v", "next"], "properties": {
        "v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}}},
     "$ref": "#/$defs/node"},  # a linked list ending at null
    {"type": "array", "items": {"$ref": "#"}},  # nested lists
    {},  # any JSON value
    {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(200)}},
    {"enum": [f"v{i}" for i in range(3000)]},
    {"type": "object", "required": ["h"], "properties": {
        "h": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "l": {"type": "array", "items": {"type": "number"}, "minItems": 50}}},
]


@pytest.mark.parametrize("schema", PASSING_SCHEMAS)
@pytest.mark.parametrize("lead", [None, ">"])
def test_the_probe_takes_grammars_replies_can_follow(tiny_loader, schema, lead):
    assert Constraint(json_grammar(schema, lead), tiny_loader.tokenizer).probe() is None


def test_a_fault_on_the_way_is_one_line_and_logged(tiny_loader):
    """A fault the probe did not meet (here: a constraint made without it, as the SDK may)
    fails its reply with the engine's first line (its other lines quote the parser's state),
    logged as a warning once."""
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    try:
        sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
        task = sched.new_task([300, 301], max_tokens=8, temperature=0.0,
                              constraint=Constraint(json_grammar(_SELF), tiny_loader.tokenizer))
        sched.run()
    finally:
        logger.remove(sink)
    assert task.finish_reason == "error", task.finish_reason
    assert "NoExtensionBias" in task.error and "\n" not in task.error, task.error
    assert sum("NoExtensionBias" in line for line in lines) == 1, lines


def test_more_tools_than_openai_takes_are_a_400(http):
    tools = [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]
    err = assert_error(http.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "x"}], "tools": tools}), 400, param="tools")
    assert "at most 128" in err["message"], err["message"]


def test_a_forced_call_no_reply_can_follow_is_a_400_naming_tools(http):
    tools = [{"type": "function", "function": {"name": "f", "parameters": _ENDLESS}}]
    err = assert_error(http.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "x"}], "tools": tools,
        "tool_choice": "required"}), 400, param="tools")
    assert "no reply can follow it" in err["message"], err["message"]


def test_response_format_with_tools_is_a_400(http):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    r = http.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "x"}], "tools": tools,
        "response_format": {"type": "json_object"}})
    assert_error(r, 400, param="response_format")


CHAT = dict(model="rwkv-7", messages=[{"role": "user", "content": "Give me an item as JSON."}],
            max_tokens=80, temperature=1.0, top_k=0, top_p=1.0, seed=11,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "item", "schema": SCHEMA}})


def test_chat_reply_in_a_schema_streamed_or_not(http):
    """The reply's content is the JSON (no reasoning before it, even when asked for), the
    same streamed; finish_reason stop."""
    r = http.post("/v1/chat/completions", json=dict(CHAT, reasoning_effort="high"))
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert "reasoning_content" not in choice["message"] or not \
        choice["message"]["reasoning_content"]
    check_schema_reply(json.loads(choice["message"]["content"]))
    chunks = stream_chunks(http, "/v1/chat/completions", dict(CHAT, reasoning_effort="high"))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks
                   if c.get("choices"))
    assert text == choice["message"]["content"]


def test_a_grammar_engine_fault_is_told_to_the_client(http, monkeypatch):
    """A reply cut short by its grammar engine's fault is a 500 naming it (not retried), or
    an error event before [DONE] when streamed: never a cut-off JSON text with
    finish_reason stop."""
    made = Constraint.__init__

    def faulty(self, *args, **kw):
        made(self, *args, **kw)
        self._matcher = _Faulty(self._matcher, "consume_token", 3)
    monkeypatch.setattr(Constraint, "__init__", faulty)
    r = http.post("/v1/chat/completions", json=CHAT)
    error = assert_error(r, 500, code="generation_error")
    assert "could not follow its grammar" in error["message"], error
    assert "injected fault" in error["message"] and r.headers["x-should-retry"] == "false"
    with http.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
        _, payloads = sse_lines(r)
    chunks = [json.loads(p) for p in payloads]
    assert "could not follow its grammar" in chunks[-1]["error"]["message"], chunks[-1]
    assert all(c["choices"][0].get("finish_reason") is None for c in chunks if c.get("choices"))


def test_completion_json_object_and_text_format(http):
    body = {"prompt": "A record:", "max_tokens": 10, "temperature": 1.0, "top_k": 0,
            "top_p": 1.0, "seed": 2}
    r = http.post("/v1/completions", json={**body, "response_format": {"type": "json_object"}})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"].lstrip(" \n").startswith("{")
    plain = http.post("/v1/completions", json=body).json()["choices"][0]["text"]
    as_text = http.post("/v1/completions", json={**body, "response_format": {"type": "text"}})
    assert as_text.json()["choices"][0]["text"] == plain and not plain.startswith("{")


def test_masks_fit_a_model_vocabulary_smaller_or_larger_than_the_tokenizers(tiny_loader,
                                                                           tmp_path):
    """The tokens a step allows, for a model of V tokens: the tokenizer's first V (a smaller
    model; end-of-text alone when none of them is allowed), or all of them and no more (a
    padded one); a model padded past the tokenizer's ids writes JSON matching the schema
    from the tokenizer's ids."""
    import torch

    from server.model.loader import RWKV070ModelLoader
    from server.model.random import main as make_random
    from server.scheduler.guide import Guide

    grammar = json_grammar(SCHEMA)

    def allowed(vocab: int) -> torch.Tensor:
        guide = Guide({0: Constraint(grammar, tiny_loader.tokenizer)}, vocab, "cpu", 0)
        return guide.apply(torch.zeros(1, vocab))[0] == 0

    full = allowed(65536)
    first = int(full.nonzero()[0])  # the first id allowed
    assert full.sum() < 65536 and first > 0
    assert torch.equal(allowed(first + 1), full[:first + 1])
    eos_alone = torch.zeros(first, dtype=torch.bool)
    eos_alone[0] = True
    assert torch.equal(allowed(first), eos_alone)
    padded = allowed(65600)
    assert torch.equal(padded[:65536], full) and not padded[65536:].any()
    path = tmp_path / "v65600.pth"
    make_random([str(path), "--preset", "tiny", "--vocab", "65600", "--seed", "2"])
    loader = RWKV070ModelLoader(str(path), device="cpu")
    sched = DynamicScheduler(loader, max_batch_size=2, buffer_size=4)
    task = constrained(sched, loader, [5, 6, 7], grammar, 80, seed=1)
    task.logit_bias = {65599: 100.0}  # an id past the tokenizer's: never drawn
    sched.run()
    assert task.finish_reason == "stop" and max(task.output) < 65536
    check_schema_reply(json.loads(loader.decode(task.output)))


@pytest.mark.parametrize("vocab,slots", [(65536, (1, 3, 6)), (65500, (1, 3, 6)),
                                         (65600, (1, 3, 6)), (40, (1, 3, 6)),
                                         (65536, (2, 3, 4)), (65600, (5, 6, 7))])
def test_masked_logits_are_the_models_where_allowed_and_minus_inf_elsewhere(vocab, slots,
                                                                            monkeypatch):
    """``Guide.apply`` against a bit-by-bit reading of the masks: constrained rows (apart or
    consecutive, the last of them ended) keep their own logits where their mask allows (the model's
    preferences, not a uniform draw over the allowed), -inf elsewhere, past the mask's ids
    too; a row allowing none of the model's V tokens allows end-of-text alone; a NaN or +inf
    logit on a disallowed token is -inf too (+inf - inf would be NaN), and on an allowed one
    never NaN; the other rows untouched."""
    import numpy as np
    import torch

    import server.scheduler.guide as guide_mod
    from server.scheduler.guide import Guide

    rng = np.random.default_rng(vocab)
    words = rng.integers(-2**31, 2**31, size=(3, 2048), dtype=np.int64).astype(np.int32)
    words[1] = 0
    words[1, 2047] = -2**31  # token 65535 alone: past a smaller model's V, end-of-text then
    monkeypatch.setattr(guide_mod, "fill_masks",
                        lambda rows, out: [out.__setitem__(i, words[i]) for _, i in rows])

    class Row:
        words = 2048

    guide = Guide({s: Row() for s in slots}, vocab, "cpu", 0)
    guide.live = [True, True, False]  # (the last slot ended: every token, unused)
    logits = torch.from_numpy(rng.standard_normal((8, vocab)).astype(np.float32))
    logits[slots[0], :4] = torch.tensor([float("nan"), float("inf"), float("nan"),
                                         float("inf")])
    others = [r for r in range(8) if r not in slots]
    logits[others[0], 5] = float("nan")
    out = guide.apply(logits)
    for i, slot in enumerate(slots[:2]):
        bits = np.unpackbits(words[i].view(np.uint8), bitorder="little")[:vocab].astype(bool)
        allowed = torch.from_numpy(np.pad(bits, (0, vocab - bits.size)))
        if not allowed.any():
            allowed[0] = True
        row, want = out[slot], logits[slot]
        assert torch.equal(row[~allowed], torch.full_like(row[~allowed], float("-inf")))
        finite = allowed & want.isfinite()
        assert torch.equal(row[finite], want[finite]) and not row.isnan().any()
    ended = slots[2]
    assert torch.equal(out[ended][:65536], logits[ended][:65536])  # (past the ids: never)
    assert torch.equal(out[others].nan_to_num(), logits[others].nan_to_num())
    assert out[others[0], 5].isnan()


def test_a_fault_after_a_whole_reply_keeps_its_stop(tiny_loader):
    """The grammar engine failing when asked what comes after a reply that is already a
    whole sentence of the grammar (a fixed word taken whole) ends it at end-of-text as the
    grammar allowed: finish_reason stop, no error. Failing while taking a token is an error,
    also where the reply before that token was whole (lowercase words: whole from the first
    letter on; the token is in the reply, unchecked)."""
    prompt = tiny_loader.encode("User: hi\n\nAssistant:")
    whole = len(tiny_loader.encode("hello"))

    def run(grammar: str, method: str, after: int):
        sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
        task = constrained(sched, tiny_loader, prompt, lark_grammar(grammar), 20, seed=1)
        task.constraint._matcher = _Faulty(task.constraint._matcher, method, after)
        sched.run()
        return task

    done = run('start: "hello"\n', "mask", whole)
    assert done.finish_reason == "stop" and done.error is None
    assert tiny_loader.decode(done.output) == "hello"
    taking = run("start: /[a-z ]+/\n", "consume_token", 3)
    assert len(taking.output) == 4 and taking.output[-1] != 0
    assert taking.finish_reason == "error" and "injected fault" in taking.error


def test_masks_of_several_rows_at_once_are_each_rows_own(tiny_loader):
    """fill_masks on llguidance's threads (several rows) gives each row the mask it gets
    alone; a row at another point of the grammar, and one in an error state (all zeros)."""
    import numpy as np

    from server.task.constraint import fill_masks

    grammar = json_grammar(SCHEMA)
    cs = [Constraint(grammar, tiny_loader.tokenizer) for _ in range(4)]
    for c, text in zip(cs, ('{"ok":', '{"ok":true,"n":', "", '{"ok":true,"n":')):
        assert all(c.accept(t) for t in tiny_loader.encode(text))
    assert not cs[3].accept(tiny_loader.encode("x")[0])  # (now in an error state)
    together = np.full((4, cs[0].words), 7, dtype=np.int32)
    fill_masks([(c, i) for i, c in enumerate(cs)], together)
    for i, c in enumerate(cs):
        alone = np.full((1, c.words), 7, dtype=np.int32)
        fill_masks([(c, 0)], alone)
        assert (alone[0] == together[i]).all(), i
    assert not together[3].any() and together[:3].any(axis=1).all()
    assert not (together[0] == together[1]).all()


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "additionalProperties": False, "required": ["city", "days"],
        "properties": {"city": {"enum": ["Paris", "Oslo"]},
                       "days": {"type": "integer", "minimum": 1, "maximum": 7}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "additionalProperties": False, "required": ["zone"],
        "properties": {"zone": {"enum": ["UTC", "CET"]}}}}}]
TOOL_CHAT = dict(model="rwkv-7", messages=[{"role": "user", "content": "Weather in Paris?"}],
                 tools=TOOLS, max_tokens=60, temperature=1.0, top_k=0, top_p=1.0, seed=4)


def check_call(call: dict, names: set) -> None:
    assert call["type"] == "function" and call["function"]["name"] in names
    args = json.loads(call["function"]["arguments"])
    if call["function"]["name"] == "get_weather":
        assert set(args) == {"city", "days"} and args["city"] in ("Paris", "Oslo")
        assert isinstance(args["days"], int) and 1 <= args["days"] <= 7
    else:
        assert args == {"zone": "UTC"} or args == {"zone": "CET"}


@pytest.mark.parametrize("choice,names", [
    ({"type": "function", "function": {"name": "get_time"}}, {"get_time"}),
    ("required", {"get_weather", "get_time"}),
])
def test_a_forced_tool_call_is_one_call_matching_its_parameters(http, choice, names):
    """tool_choice naming a function or "required": the random model's reply is one call of
    an offered (the named) function with arguments matching its schema, streamed or not."""
    for seed in (4, 5):
        r = http.post("/v1/chat/completions", json=dict(TOOL_CHAT, tool_choice=choice,
                                                         seed=seed))
        assert r.status_code == 200, r.text
        choice0 = r.json()["choices"][0]
        assert choice0["finish_reason"] == "tool_calls", choice0
        calls = choice0["message"]["tool_calls"]
        assert len(calls) == 1 and not choice0["message"]["content"]
        check_call(calls[0], names)
    chunks = stream_chunks(http, "/v1/chat/completions", dict(TOOL_CHAT, tool_choice=choice))
    deltas = [d for c in chunks if c.get("choices")
              for d in c["choices"][0]["delta"].get("tool_calls") or []]
    args = "".join(d["function"].get("arguments", "") for d in deltas)
    name = next(d["function"]["name"] for d in deltas if d["function"].get("name"))
    check_call({"type": "function", "function": {"name": name, "arguments": args}}, names)


def test_auto_tool_choice_stays_free(http):
    """(The check above could not pass by chance: the same request with tool_choice auto,
    unconstrained, makes no call.)"""
    r = http.post("/v1/chat/completions", json=dict(TOOL_CHAT, tool_choice="auto"))
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] != "tool_calls"


NESTED = {"type": "object", "additionalProperties": False, "required": ["at", "kids"],
          "$defs": {"P": {"type": "object", "additionalProperties": False, "required": ["x"],
                          "properties": {"x": {"enum": [1, 2]}}}},
          "properties": {"at": {"$ref": "#/$defs/P"},
                         "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 1}}}


def check_nested(args: dict) -> None:
    assert set(args) == {"at", "kids"} and args["at"] in ({"x": 1}, {"x": 2})
    assert len(args["kids"]) <= 1
    for kid in args["kids"]:
        check_nested(kid)


def test_a_forced_calls_refs_resolve_within_its_parameters(http):
    """$defs and "#" in a function's parameters (the openai SDK's pydantic_function_tool
    writes nested models so) point into those parameters: they were read from the call's
    wrapper (a 400 for $defs, arguments of the wrong shape for "#"; session 46's QA)."""
    tools = [{"type": "function", "function": {"name": 'tr"ee', "parameters": NESTED}},
             TOOLS[1]]
    for seed in range(4):
        r = http.post("/v1/chat/completions", json=dict(
            TOOL_CHAT, tools=tools, tool_choice="required", temperature=2.0, seed=seed,
            max_tokens=200))
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        if choice["finish_reason"] == "length":
            continue
        call = choice["message"]["tool_calls"][0]["function"]
        if call["name"] == 'tr"ee':
            check_nested(json.loads(call["arguments"]))
        else:
            check_call({"type": "function", "function": call}, {"get_time"})


@pytest.mark.parametrize("parameters,words", [
    ({"type": "object", "x-guidance": [1]}, "x-guidance must be an object"),
    ({"enum": ["a", "b"]}, "of type \"object\""),
    ({"type": "boolean"}, "of type \"object\""),
    ({"type": "object", "properties": {"a": {"type": "frob"}}}, "no usable grammar"),
])
def test_a_forced_call_of_unusable_parameters_is_a_400_naming_them(http, parameters, words):
    tools = TOOLS + [{"type": "function", "function": {"name": "bad", "parameters": parameters}}]
    err = assert_error(http.post("/v1/chat/completions", json=dict(
        TOOL_CHAT, tools=tools, tool_choice="required")), 400, param="tools.2.function.parameters")
    assert words in err["message"] and len(err["message"]) < 500, err["message"]


def test_strict_schemas_close_their_objects_and_nothing_else():
    """``strict: true`` (OpenAI's strict mode, which needs ``additionalProperties: false`` on
    every object) closes each object schema that leaves it out, wherever it sits (properties,
    items in either form, $defs, anyOf, patternProperties); what a schema says itself is
    kept; a property named like a keyword is a name, not a schema; the input is untouched."""
    from server.task.constraint import closed_objects

    schema = {"type": "object", "properties": {
        "properties": {"type": "string"},
        "list": {"type": "array", "items": {"properties": {"a": {"type": "integer"}}}},
        "pair": {"type": "array", "items": [{"type": "object"}, {"type": "string"}]},
        "open": {"type": "object", "additionalProperties": True},
        "typed": {"type": ["object", "null"], "additionalProperties": {"type": "integer"}},
        "either": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
        "patternProperties": {"^x": {"type": "object"}},
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}}
    before = json.dumps(schema)
    out = closed_objects(schema)
    assert json.dumps(schema) == before
    props = out["properties"]
    assert out["additionalProperties"] is False and props["properties"] == {"type": "string"}
    assert props["list"]["items"]["additionalProperties"] is False
    assert props["pair"]["items"][0]["additionalProperties"] is False
    assert "additionalProperties" not in props["pair"]["items"][1]
    assert props["open"]["additionalProperties"] is True
    assert props["typed"]["additionalProperties"] == {"type": "integer"}
    assert out["patternProperties"]["^x"]["additionalProperties"] is False
    assert out["$defs"]["Node"]["additionalProperties"] is False
    assert props["either"]["anyOf"][1] == {"type": "null"}


SMALL = {"type": "object", "required": ["color", "n", "flag"], "properties": {
    "color": {"enum": ["red", "green", "blue"]}, "n": {"type": "integer"},
    "flag": {"type": "boolean"}}}


def test_a_strict_format_or_function_has_only_the_keys_it_names(http):
    """A ``strict: true`` schema (response_format or a forced function) without
    ``additionalProperties``: replies hold the keys it names and end (without strict the
    random model wrote on in a key of its own until max_tokens: session 48's QA); a
    function without parameters takes none (arguments {}, as OpenAI reads it)."""
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "strict": True, "schema": SMALL}}
    for seed in range(3):
        r = http.post("/v1/chat/completions", json=dict(CHAT, response_format=fmt, seed=seed,
                                                        max_tokens=200))
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        assert set(json.loads(choice["message"]["content"])) == set(SMALL["properties"])
    strict_fn = {"type": "function", "function": {"name": "pick", "strict": True,
                                                  "parameters": SMALL}}
    bare = {"type": "function", "function": {"name": "ping"}}
    for tool in (strict_fn, bare):
        for seed in range(4):
            r = http.post("/v1/chat/completions", json=dict(
                TOOL_CHAT, tools=[tool], tool_choice="required", temperature=2.0, seed=seed,
                max_tokens=200))
            choice = r.json()["choices"][0]
            assert choice["finish_reason"] == "tool_calls", choice
            args = json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"])
            assert set(args) == (set(SMALL["properties"]) if tool is strict_fn else set())


def test_task_api_rounds_take_their_requests_format_and_biases(http, tiny_loader):
    """The Task API's create, continue and fork take response_format and logit_bias for the
    round they start (not stored: a later round without them is free); unusable ones are
    422s naming the field."""
    from task_api_client import create, wait_result

    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}
    hot = dict(temperature=1.5, top_k=0, top_p=1, presence_penalty=0, seed=3)
    t = create(http, "/v1/tasks/create", max_tokens=60, response_format=fmt, **hot)["task_id"]
    check_schema_reply(json.loads(wait_result(http, t)["result"]))
    hello = tiny_loader.encode(" hello")[0]
    r = http.post(f"/v1/tasks/{t}/continue", json={"prompt": " next", "max_tokens": 3,
                                                   "logit_bias": {str(hello): 100}})
    assert r.status_code == 200, r.text
    assert wait_result(http, t)["result"] == " hello" * 3
    # free again (no prompt: the last round ended at max_tokens, its next token is there)
    r = http.post(f"/v1/tasks/{t}/continue", json={"max_tokens": 6, **hot})
    assert r.status_code == 200, r.text
    free = wait_result(http, t)["result"]
    assert free != " hello" * 6 and not free.startswith("{")
    r = http.post(f"/v1/tasks/{t}/fork", json={"max_tokens": 60, "response_format": fmt,
                                               **hot})
    assert r.status_code == 200, r.text
    check_schema_reply(json.loads(wait_result(http, r.json()["task_id"])["result"]))
    odd = {"type": "json_schema", "json_schema": {"name": "s", "schema": {"x-guidance": 5}}}
    for field, value in (("response_format", {"type": "xml"}), ("logit_bias", {"x": 1}),
                         ("logit_bias", {"5": 101}), ("response_format", odd)):
        for path in ("/v1/tasks/tmp", f"/v1/tasks/{t}/continue", f"/v1/tasks/{t}/fork"):
            r = http.post(path, json={"prompt": "x", field: value})
            assert r.status_code == 422 and field in r.text, (path, r.text)


def test_a_chat_reply_closes_the_thinking_switch_before_its_json(http):
    """The chat prompt ends with the thinking switch's open tag (`` <think>\\n</think``): a
    constrained reply first closes it (``>``, at most one blank after), as a direct reply
    does, then its JSON or call; the text shows neither. A completion starts at the JSON."""
    for body in (dict(CHAT), dict(TOOL_CHAT, tool_choice="required")):
        r = http.post("/v1/chat/completions", json=dict(body, logprobs=True))
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        first = choice["logprobs"]["content"][0]["token"]
        assert first.startswith(">"), first
        content = choice["message"]["content"]
        assert content is None or content.startswith("{"), content
    r = http.post("/v1/completions", json={"prompt": "x", "max_tokens": 5, "logprobs": 0,
                                           "response_format": {"type": "json_object"}})
    assert r.json()["choices"][0]["logprobs"]["tokens"][0].lstrip(" \n").startswith("{")


def test_a_grammar_the_engine_refuses_with_the_vocabulary_is_a_4xx(http, monkeypatch):
    """Making a round's grammar state can still fail after the grammar was checked (without a
    vocabulary): a 400 / 422 naming the field, no task left behind, not a 500."""
    import server.api.response_format as rf
    from server.task.constraint import GrammarError

    def refused(*args):
        raise GrammarError("refused")

    monkeypatch.setattr(rf, "Constraint", refused)
    fmt = {"type": "json_object"}
    err = assert_error(http.post("/v1/chat/completions", json=dict(CHAT, response_format=fmt)),
                       400, param="response_format")
    assert "refused" in err["message"]
    assert_error(http.post("/v1/chat/completions", json=dict(TOOL_CHAT, tool_choice="required")),
                 400, param="tools")
    assert_error(http.post("/v1/completions", json={"prompt": "x", "response_format": fmt}),
                 400, param="response_format")
    before = http.get("/v1/tasks/list").json()
    r = http.post("/v1/tasks/create", json={"prompt": "x", "response_format": fmt})
    assert r.status_code == 422 and "response_format" in r.text
    assert http.get("/v1/tasks/list").json() == before
    assert http.get("/health").json()["active"] == 0


def test_tools_whose_forced_call_grammar_is_refused_as_a_whole_are_a_400(http, monkeypatch):
    """Each function's grammar passes alone and their union is refused (thousands of tools:
    "grammar too big", session 47's review; a 500 before): a 400 naming tools, the engine's
    message cut to its first line."""
    import server.task.constraint as constraint
    from server.task.constraint import GrammarError

    real = constraint.lark_grammar  # (tools imports it when a forced call is asked for)

    def refuse_union(lark):
        if "\ncall:" in lark:
            raise GrammarError("the grammar cannot be used: too big")
        return real(lark)

    monkeypatch.setattr(constraint, "lark_grammar", refuse_union)
    err = assert_error(http.post("/v1/chat/completions", json=dict(TOOL_CHAT,
                                                                   tool_choice="required")),
                       400, param="tools")
    assert "too big" in err["message"]


@pytest.mark.parametrize("path,body,slow", [
    ("/v1/chat/completions", dict(CHAT, response_format={"type": "json_object"}), "fmt"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 2,
                         "response_format": {"type": "json_object"}}, "fmt"),
    ("/v1/tasks/tmp", {"prompt": "x", "max_tokens": 2,
                       "response_format": {"type": "json_object"}}, "fmt"),
    ("/v1/chat/completions", dict(TOOL_CHAT, tool_choice="required"), "tools")])
def test_a_slow_grammar_compiles_off_the_event_loop(http, monkeypatch, path, body, slow):
    """A grammar that takes long to compile (a schema of thousands of properties: seconds)
    holds neither the event loop nor the other requests: ``/health`` answers meanwhile (it
    waited out the whole compilation before; session 47's review)."""
    import threading
    import time

    import server.api.response_format as rf
    import server.task.constraint as constraint

    module, name = (rf, "json_grammar") if slow == "fmt" else (constraint, "lark_grammar")
    real = getattr(module, name)
    compiling = threading.Event()

    def slow_compile(*args):
        compiling.set()
        time.sleep(1.5)  # (as the engine, without the GIL)
        return real(*args)

    monkeypatch.setattr(module, name, slow_compile)
    done = {}
    sender = threading.Thread(target=lambda: done.update(r=http.post(path, json=body)))
    sender.start()
    assert compiling.wait(10)
    t0 = time.monotonic()
    assert http.get("/health").status_code == 200
    waited = time.monotonic() - t0
    sender.join(30)
    assert done["r"].status_code == 200, done["r"].text
    assert waited < 0.75, waited


def test_a_chat_of_more_choices_than_ever_fit_is_refused_before_its_grammar_states(
        http, server, monkeypatch):
    """n past what the scheduler ever takes at once: a 400 naming n before the n grammar
    states (or tasks) are made (they were made, then refused at submission)."""
    import server.api.routes.openai as routes

    sched = server.runtime.scheduler
    made = []
    monkeypatch.setattr(type(sched), "max_in_flight", property(lambda self: 2))
    monkeypatch.setattr(routes, "new_constraints", lambda *a: made.append(a))
    r = http.post("/v1/chat/completions",
                  json=dict(CHAT, n=3, response_format={"type": "json_object"}))
    assert_error(r, 400, param="n")
    assert made == []


def test_new_task_takes_a_constraint_and_biases_before_a_running_daemon_starts_it(tiny_loader):
    """Set on the task ``new_task`` returns, a constraint could come after a running daemon
    had started the task (its reply then free text: session 47's check of a GPU test); given
    to ``new_task`` it is there from the first token. A bad bias is refused there."""
    grammar = json_grammar(SCHEMA)
    sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=4)
    sched.start_daemon()
    try:
        tasks = [sched.new_task([300 + i, 301, 302], max_tokens=60, temperature=1.0, top_k=0,
                                top_p=1.0, seed=i, logit_bias={5: 1.5},
                                constraint=Constraint(grammar, tiny_loader.tokenizer))
                 for i in range(3)]
        sched.run()
        for task in tasks:
            assert task.finish_reason == "stop" and replays(tiny_loader, grammar, task.output)
            check_schema_reply(json.loads(tiny_loader.decode(task.output)))
        with pytest.raises(ValueError, match="logit_bias"):
            sched.new_task([5, 6], logit_bias={10**9: 1.0})
    finally:
        sched.shutdown()


# ---- from session 52's mutation testing: behaviour no test pinned down ------------------------
def test_a_row_that_did_not_accept_its_token_ends_and_its_grammar_stays(tiny_loader):
    """Guide.finish: a row whose last token was not accepted (it ended: end-of-text, its
    length, a stop) is no longer live (its next steps' masks allow everything) and its
    grammar does not take that token; an accepted token is taken."""
    import torch

    from constrained_cases import SCHEMA
    from server.scheduler.guide import Guide
    from server.task.constraint import Constraint, json_grammar

    grammar = json_grammar(SCHEMA)
    cs = {row: Constraint(grammar, tiny_loader.tokenizer) for row in (0, 1)}
    guide = Guide(cs, 65536, "cpu", 0)
    brace = tiny_loader.encode("{")[0]
    guide.apply(torch.zeros(2, 65536))
    guide.record(torch.tensor([brace, brace]), torch.tensor([True, False]))
    out = guide.apply(torch.zeros(2, 65536))  # takes the recorded tokens first
    assert guide.live == [True, False]
    assert bool((out[1] == 0).all())  # the ended row: every token allowed
    assert cs[1].accept(brace)  # its grammar did not take the token: "{" still comes first


def test_a_schema_without_strict_leaves_its_objects_open(tiny_loader):
    """response_format json_schema without "strict" (OpenAI's default: false): an object that
    leaves additionalProperties out takes other properties; with strict: true it does not."""
    from server.api.response_format import response_grammar
    from server.task.constraint import Constraint

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    reply = tiny_loader.tokenizer.encode('{"a":1,"b":2}')

    def takes(spec) -> bool:
        c = Constraint(response_grammar({"type": "json_schema", "json_schema": spec}),
                       tiny_loader.tokenizer)
        return all(c.accept(t) for t in reply)
    assert takes({"name": "x", "schema": schema})
    assert not takes({"name": "x", "schema": schema, "strict": True})


def test_a_forced_call_writes_a_non_ascii_name_as_the_prompt_shows_it(http):
    """A function named in Chinese (names are free text here): the forced call's grammar wrote
    its name as JSON's ASCII escapes ("\\u67e5\\u8be2..."), unlike the tools' description and
    the history the model reads (raw UTF-8): 6 tokens a character, which ``max_tokens`` cut."""
    name = "查询天气"
    tools = [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "additionalProperties": False, "required": ["城市"],
        "properties": {"城市": {"enum": ["北京"]}}}}}]
    body = dict(TOOL_CHAT, messages=[{"role": "user", "content": "北京天气？"}], tools=tools,
                tool_choice={"type": "function", "function": {"name": name}}, logprobs=True)
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == name
    assert json.loads(call["function"]["arguments"]) == {"城市": "北京"}
    raw = bytes(b for e in choice["logprobs"]["content"] for b in e["bytes"]).decode()
    assert f'"name":"{name}"' in raw, raw  # as tools_instructions and render_tool_calls write it


def test_a_forced_calls_grammar_takes_a_name_no_utf8_text_holds(tiny_loader):
    """(The raw name above, but a lone surrogate, valid in a JSON request, stays escaped:
    raw, the grammar could not be handed to llguidance: UnicodeEncodeError.)"""
    from server.api.tools import forced_call_grammar, parse_tools

    for name in ("查询天气", "a\ud800b"):
        tools = parse_tools([{"type": "function", "function": {"name": name}}])
        grammar = forced_call_grammar(tools, "required", ">")
        assert Constraint(grammar, tiny_loader.tokenizer).error is None
