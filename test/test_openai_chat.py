"""Chat prompt, tool-call convention and output splitter (pure functions, fixed strings)."""

import json
import sys

import pytest

from server.api.chat import ChatError, build_chat_prompt, fold, wants_think
from server.api.splitter import OutputSplitter, collect, held_suffix
from server.api.tools import parse_tool_call, parse_tools, tools_instructions

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


# ---- prompt --------------------------------------------------------------------------------------
def test_prompt_roles_folding_and_think_switch():
    msgs = [{"role": "developer", "content": "Be brief.  \n\n\nNo lists."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"},
                                         {"type": "text", "text": "there  "}]},
            {"role": "assistant", "content": "<think>secret\n\nplan</think>Hello!",
             "reasoning_content": "ignored"},
            {"role": "user", "content": "Bye\n\nnow"}]
    expected = ("System: Be brief.\nNo lists.\n\nUser: Hi\nthere\n\nAssistant: Hello!\n\n"
                "User: Bye\nnow\n\nAssistant:")
    assert build_chat_prompt(msgs, think=True) == expected + " <think"
    assert build_chat_prompt(msgs, think=False) == expected + " <think>\n</think"


def test_prompt_seed_readme_example():
    msgs = [{"role": "system", "content": "你是一个专业的技术翻译。"},
            {"role": "user", "content": "LLMs use attention."}]
    assert build_chat_prompt(msgs, think=True) == (
        "System: 你是一个专业的技术翻译。\n\nUser: LLMs use attention.\n\nAssistant: <think")


def test_prompt_null_content_tool_history_and_tool_role():
    msgs = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"}]
    assert build_chat_prompt(msgs, think=False) == (
        "User: Weather in Paris?\n\nAssistant: <tool_call>{\"name\": \"get_weather\", "
        "\"arguments\": {\"city\": \"Paris\"}}</tool_call>\n\nTool: 18C, sunny\n\n"
        "Assistant: <think>\n</think")


def test_an_empty_tool_result_keeps_its_turn():
    """Each call's result comes back in a Tool: message, in the calls' order (what the tools'
    description tells the model): an empty result ("" or null, a tool with nothing to say) is a
    Tool: turn too. It was dropped: the next result read as the first call's, and a lone call
    looked unanswered (a chat-format review)."""
    call = lambda i, city: {"id": f"call_{i}", "type": "function",  # noqa: E731
                            "function": {"name": "get_weather", "arguments": {"city": city}}}
    msgs = [{"role": "user", "content": "Paris and Rome?"},
            {"role": "assistant", "content": None,
             "tool_calls": [call(1, "Paris"), call(2, "Rome")]},
            {"role": "tool", "tool_call_id": "call_1", "content": ""},
            {"role": "tool", "tool_call_id": "call_2", "content": "25C"}]
    turns = build_chat_prompt(msgs, think=True).split("\n\n")
    assert turns[2:] == ["Tool:", "Tool: 25C", "Assistant: <think"]
    msgs[2]["content"] = None
    assert build_chat_prompt(msgs, think=True).split("\n\n")[2:] == turns[2:]


def test_prompt_tools_described_in_system_message():
    tools = parse_tools(WEATHER)
    msgs = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Paris?"}]
    prompt = build_chat_prompt(msgs, think=True, tools=tools)
    system = prompt.split("\n\n")[0]
    assert system.startswith("System: You help.\nYou can call these tools")
    assert '{"name": "get_weather", "description": "Weather of a city"' in system
    assert "<tool_call>" in system and "\n\n" not in system
    no_system = build_chat_prompt(msgs[1:], think=True, tools=tools)
    assert no_system.startswith("System: You can call these tools")
    assert "User: Paris?" in no_system
    assert "You must call the tool get_weather now." in tools_instructions(
        tools, {"type": "function", "function": {"name": "get_weather"}})
    assert "at least one tool" in tools_instructions(tools, "required")
    assert tools_instructions(tools, "none") == ""


@pytest.mark.parametrize("msgs,param", [
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
     "messages.0.content.0"),
    ([{"role": "wizard", "content": "x"}], "messages.0.role"),
    ([], "messages"),
    (["hello"], "messages.0"),
])
def test_prompt_errors_name_the_field(msgs, param):
    with pytest.raises(ChatError) as e:
        build_chat_prompt(msgs, think=True)
    assert e.value.param == param
    assert ("image" in e.value.message.lower()) == param.endswith("content.0")


def test_prompt_of_empty_messages_starts_with_the_answer():
    assert build_chat_prompt([{"role": "user", "content": " \n "}], think=True) == "Assistant: <think"


def test_fold_and_think_switch():
    assert fold("a  \n\n \n b \r\n\r\nc ") == "a\n b\nc"
    assert wants_think(None, True) and not wants_think(None, False)
    assert not wants_think("none", True) and wants_think("low", False)


def test_tool_errors():
    with pytest.raises(ChatError):
        parse_tools([{"type": "function", "function": {"description": "no name"}}])
    with pytest.raises(ChatError):
        tools_instructions(parse_tools(WEATHER), {"type": "function", "function": {"name": "x"}})
    deep = {}
    for _ in range(sys.getrecursionlimit() + 10):  # parsed (a C parser), not writable back
        deep = {"a": deep}
    with pytest.raises(ChatError, match="nested too deeply") as e:
        tools_instructions(parse_tools([{"type": "function", "function": {
            "name": "f", "parameters": deep}}]))
    assert e.value.param == "tools.0.function.parameters"  # was a RecursionError: a 500
    with pytest.raises(ChatError, match="nested too deeply"):
        build_chat_prompt([{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": deep}}]},
            {"role": "user", "content": "x"}], think=False)


# ---- tool-call parsing ------------------------------------------------------------------------------
@pytest.mark.parametrize("body,expected", [
    ('{"name": "f", "arguments": {"a": 1}}', ("f", '{"a": 1}')),
    ('\n```json\n{"name": "f", "arguments": {"a": "é"}}\n```\n', ("f", '{"a": "é"}')),
    ('{"name": "f", "arguments": "{\\"a\\": 2}"}', ("f", '{"a": 2}')),
    ('{"name": "f", "parameters": {"b": [1]}}', ("f", '{"b": [1]}')),
    ('{"function": {"name": "f", "arguments": {}}}', ("f", "{}")),
    ('call: {"name": "f"} thanks', ("f", "{}")),
    ('{"arguments": {}}', None),
    ("not json", None),
    # OpenAI's arguments are an object (LangChain's ToolCall.args is a dict): a list, a
    # number, a boolean or a string of a list is no call a client can dispatch; null is none
    # given (session 53's review: they came back as tool calls)
    ('{"name": "f", "arguments": [1, 2]}', None),
    ('{"name": "f", "arguments": 5}', None),
    ('{"name": "f", "arguments": true}', None),
    ('{"name": "f", "arguments": "[1]"}', None),
    ('{"name": "f", "arguments": null}', ("f", "{}")),
    # a string that is not JSON, or JSON cut short, is no call either: clients parse
    # ``arguments`` (session 71's QA: passed on as a call)
    ('{"name": "f", "arguments": "city=Paris"}', None),
    ('{"name": "f", "arguments": "{\\"city\\": \\"Paris\\""}', None),
    ('{"name": "f", "arguments": "  "}', ("f", "{}")),
])
def test_parse_tool_call(body, expected):
    assert parse_tool_call(body) == expected


# ---- splitter ----------------------------------------------------------------------------------------
def run(mode, chunks, reason="stop", **kw):
    s = OutputSplitter(mode, **kw)
    pieces = []
    for c in chunks:
        pieces += s.feed(c)
    pieces += s.finish(reason)
    return pieces, s


def chars(text):
    return list(text)  # the hardest chunking: one character at a time


@pytest.mark.parametrize("chunking", [chars, lambda t: [t]])
def test_splitter_reasoning_then_answer_and_boundary(chunking):
    text = ">I should greet.</think>\nHello there!\n\nUser: more"
    pieces, s = run("think", chunking(text))
    out = collect(pieces)
    assert out == {"reasoning": "I should greet.", "content": "Hello there!", "calls": []}
    assert s.stopped


def test_splitter_direct_mode_drops_gt_and_trailing_newlines():
    pieces, s = run("direct", [">", "\nHi", " there", "\n", "\n"], reason="stop")
    assert [p.text for p in pieces] == ["Hi", " there"] and not s.stopped
    pieces, _ = run("direct", [">Hi\n"], reason="length")
    assert collect(pieces)["content"] == "Hi\n"  # cut by max_tokens: the newline is real text


@pytest.mark.parametrize("chunking", [chars, lambda t: [t]])
@pytest.mark.parametrize("text,stop", [(">Hi  ", "  Q"), (">Hi \n", " \nX"),
                                       (">Hi \n\n", " \n\nX"), (">Hi\n\n\n", "\n\n\nX"),
                                       (">Hi\n\n", "\n\nUser:X"),
                                       (">Done.\n\n", ".\n\n###")])
def test_a_stop_string_that_never_matches_leaves_a_chat_answer_as_it_is(chunking, text, stop):
    """A chat answer ending at end-of-text gives the same text with or without a stop string
    that does not occur in it: the whitespace held because the stop string might start there
    was dropped with the newlines before end-of-text (stop "  Q" turned "Hi  " into "Hi";
    session 42's QA). Only the newlines held as the turn boundary's start go."""
    plain = collect(run("direct", chunking(text))[0])["content"]
    pieces, s = run("direct", chunking(text), stop=[stop])
    assert collect(pieces)["content"] == plain and not s.stopped
    assert plain == text[1:].rstrip("\n") + ("\n" if text.endswith("\n\n\n") else "")


def test_splitter_completion_keeps_its_trailing_newlines_at_end_of_text():
    """A completion's text is the document's: its last newline (held back as a possible start
    of the turn boundary) stays when end-of-text ends it, as a code completion's before its
    suffix (a chat answer drops them: the test above)."""
    for chunking in (chars, lambda t: [t]):
        for text in ("    return x\n", "line1\nline2\n", "abc\n\n", "x\r\n"):
            pieces, s = run("text", chunking(text), reason="stop")
            assert collect(pieces)["content"] == text and not s.stopped


def test_splitter_completion_drops_the_blank_line_of_a_new_turn():
    """When the engine's new-turn check ended a completion (``turn``: "User" after the blank
    line), the blank line is the turn's: dropped, as when the boundary ends the text (it was
    kept; session 54's note). A stop string in it still ends the text there."""
    for chunking in (chars, lambda t: [t]):
        for text, want in (("abc\n\n", "abc"), ("完成。\n\n", "完成。"), ("a\n\n\n", "a\n")):
            s = OutputSplitter("text")
            pieces = [p for c in chunking(text) for p in s.feed(c)] + s.finish("stop", turn=True)
            assert collect(pieces)["content"] == want and not s.stopped
        s = OutputSplitter("text", stop=["\n\n"])
        pieces = [p for c in chunking("abc\n\n") for p in s.feed(c)] + s.finish("stop", True)
        assert collect(pieces)["content"] == "abc" and s.stopped and s.stopped_at == 5


def test_splitter_output_does_not_depend_on_where_chunks_end():
    """A stop string matched inside a tag or the boundary that has not fully arrived waits
    for the next chunk: every cut of the text gives what the whole text gives."""
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>tai'
    cases = [("direct", ">" + call, dict(stop=["l"], tools=True)),
             ("text", "abc\n\nUser: hi", dict(stop=["User"])),
             ("text", "abc\n\nUsername", dict(stop=["User"])),
             ("text", "one two\n\nthree\n\nUser: x", dict(stop=["\n\n"])),
             # stops where one begins another: the one ending first ends the output (usage
             # counted the longer one's last token when both came in one pulse; session 28)
             ("text", " nineteen FULL]* eigen", dict(stop=["FULL", "FULL]"])),
             ("text", "xabcdy", dict(stop=["abcd", "c"])),
             # a stop string in the whitespace before end-of-text ends the answer (it was
             # dropped with that whitespace when the text came in several chunks; session 28)
             ("direct", "\nab好</think> \n", dict(stop=["\n", ":"])),
             ("direct", ">User  \n", dict(stop=["\n", ":"], tools=True))]
    for mode, text, kw in cases:
        whole, ws = run(mode, [text], **kw)
        for cuts in [(cut,) for cut in range(1, len(text))] + [tuple(range(1, len(text)))]:
            chunks = [text[a:b] for a, b in zip((0,) + cuts, cuts + (len(text),))]
            pieces, s = run(mode, chunks, **kw)
            assert collect(pieces) == collect(whole), (text, cuts)
            assert (s.stopped, s.stopped_at) == (ws.stopped, ws.stopped_at), (text, cuts)
    _, s = run("text", [" nineteen FULL]* eigen"], stop=["FULL]", "FULL"])
    assert s.stopped_at == len(" nineteen FULL")
    pieces, s = run("text", ["xabcdy"], stop=["abcd", "c"])
    assert collect(pieces)["content"] == "xab" and s.stopped_at == len("xabc")
    pieces, s = run("direct", [">User  \n"], stop=["\n", ":"], tools=True)
    assert collect(pieces)["content"] == "User  " and s.stopped
    pieces, _ = run("direct", [">" + call], stop=["l"], tools=True)
    assert collect(pieces)["calls"] == [("f", "{}")]


def test_splitter_stop_strings_never_leak():
    for chunking in (chars, lambda t: [t], lambda t: [t[:7], t[7:]]):
        pieces, s = run("text", chunking("abc STOP def"), stop=["STOP", "xyz"])
        assert "".join(p.text for p in pieces) == "abc "
        assert s.stopped
    pieces, s = run("text", ["abc ST"], reason="length", stop=["STOP"])
    assert collect(pieces)["content"] == "abc ST" and not s.stopped  # a partial match is text


def test_splitter_stopped_at_is_the_end_of_the_match():
    """Characters fed up to the end of the stop string (or the boundary) that ended the output,
    however the text came in: what usage counts tokens up to."""
    for chunking in (chars, lambda t: [t], lambda t: [t[:6], t[6:]]):
        _, s = run("text", chunking("abc STOP def"), stop=["STOP"])
        assert s.stopped_at == len("abc STOP")
        text = ">I should greet.</think>\nHello there!\n\nUser: more"
        _, s = run("think", chunking(text))
        assert s.stopped_at == text.index("User:") + len("User:")
        _, s = run("direct", chunking(">\nHi. Then more"), stop=["."])  # after the template's
        assert s.stopped_at == len(">\nHi.")  # ">" and newline, which count as generated text
    _, s = run("text", ["abc ST"], reason="length", stop=["STOP"])
    assert s.stopped_at is None


def test_tokens_through_counts_tokens_up_to_a_character():
    from server.api.completion import tokens_through
    from server.model.tokenizer import Tokenizer

    tok = Tokenizer()
    ids = tok.encode("Hello world, and more 你好")
    text = tok.decode(ids)
    for end in range(1, len(text) + 1):
        k = tokens_through(tok, ids, end)
        assert len(tok.decode(ids[:k])) >= end > len(tok.decode(ids[:k - 1]).rstrip("\ufffd"))
    assert tokens_through(tok, ids, len(text) + 5) == len(ids)


def test_splitter_holds_partial_markers():
    s = OutputSplitter("text", stop=["END"])
    assert [p.text for p in s.feed("one E")] == ["one "]
    assert [p.text for p in s.feed("x")] == ["Ex"]
    assert s.feed("\n") == [] and s.feed("\nUs") == []
    assert s.feed("er:") == [] and s.stopped
    assert held_suffix("ab\n\nUs", ["\n\nUser:"]) == 4


def test_splitter_stop_applies_to_answer_not_reasoning():
    pieces, s = run("think", [">a.b</think>x.y"], stop=["."])
    assert collect(pieces) == {"reasoning": "a.b", "content": "x", "calls": []}


@pytest.mark.parametrize("chunking", [chars, lambda t: [t]])
def test_splitter_stop_ignores_the_newline_before_the_answer(chunking):
    # the model writes "</think>\n" (or ">\n") before its answer: stop=["\n"] used to end the
    # reply there, with empty content
    for mode, text in (("think", ">why</think>\nFirst line.\nSecond"),
                       ("direct", ">\n\nFirst line.\nSecond")):
        pieces, s = run(mode, chunking(text), stop=["\n"])
        assert collect(pieces)["content"] == "First line." and s.stopped
    pieces, s = run("direct", chunking(">\n\nUser: hi"), stop=["\n"])
    assert collect(pieces)["content"] == "" and s.stopped  # the boundary still ends the turn
    pieces, s = run("text", chunking("\nabc"), stop=["\n"])
    assert collect(pieces)["content"] == "" and s.stopped  # a completion's text is all its own


@pytest.mark.parametrize("chunking", [chars, lambda t: [t]])
def test_a_fill_in_the_middles_text_keeps_the_turn_boundary(chunking):
    """A completion's text ends at the chat format's new turn; a fill-in-the-middle's (code)
    does not: a blank line then ``User = get_user_model()`` was cut (session 41's QA)."""
    code = "import x\n\nUser: int = 1\n"
    pieces, s = run("text", chunking(code), reason="length")
    assert collect(pieces)["content"] == "import x" and s.stopped
    pieces, s = run("text", chunking(code), reason="length", boundary=False, stop=["\n\n\n"])
    assert collect(pieces)["content"] == code and not s.stopped


@pytest.mark.parametrize("chunking", [chars, lambda t: [t]])
def test_splitter_tool_calls(chunking):
    text = ('>Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}'
            '</tool_call>\n<tool_call>{"name": "f", "arguments": {}}</tool_call>\n')
    pieces, s = run("direct", chunking(text), tools=True)
    out = collect(pieces)
    # the newlines around and between the calls are not content: "Let me check.\n\n" and a
    # "\n" delta between the calls' deltas before session 25's QA
    assert out["content"] == "Let me check."
    assert out["calls"] == [("get_weather", '{"city": "Paris"}'), ("f", "{}")]
    kinds = [p.kind for p in pieces if p.text]
    assert kinds.index("tool_call") == len(kinds) - 2 and kinds[-1] == "tool_call"
    assert s.tool_calls == 2
    assert all("<tool" not in p.text for p in pieces if p.kind == "content")


@pytest.mark.parametrize("chunking", [chars, lambda t: [t]])
def test_splitter_closing_tag_inside_a_json_string_is_the_arguments(chunking):
    """A ``</tool_call>`` inside a string of the call's JSON (code that prints it) is part of
    the arguments: the block ends at the tag after the JSON (it ended at the first, and the
    whole call came back as text; session 27's QA). Text after the call stays content."""
    code = {"code": "print('</tool_call>') # \\\" </tool_call>"}
    call = json.dumps({"name": "run", "arguments": code})
    pieces, s = run("direct", chunking("><tool_call>" + call + "</tool_call>\nDone."), tools=True)
    out = collect(pieces)
    assert [(n, json.loads(a)) for n, a in out["calls"]] == [("run", code)]
    assert out["content"] == "Done." and s.tool_calls == 1


def test_splitter_tool_call_unclosed_bad_and_disabled():
    pieces, _ = run("direct", ['>\n<tool_call>{"name": "f", "arguments": {"x": 1}}'], tools=True)
    assert collect(pieces)["calls"] == [("f", '{"x": 1}')]  # (the model ended it: taken)
    call = '{"name": "f", "arguments": {"x": 1}}'
    for cut in (call, call + "</tool_"):
        # cut by max_tokens: text, as the README says, however whole its arguments (a call
        # with finish_reason "length" came back; session 47's soak)
        pieces, _ = run("direct", [">\n<tool_call>" + cut], reason="length", tools=True)
        assert collect(pieces) == {**collect([]), "content": "<tool_call>" + cut}, pieces
    pieces, _ = run("direct", [">text ends <tool"], tools=True)  # (held, then all of it)
    assert collect(pieces)["content"] == "text ends <tool"
    pieces, s = run("direct", [">a <tool_call>oops</tool_call> b"], tools=True)
    assert collect(pieces)["content"] == "a <tool_call>oops</tool_call> b" and not s.tool_calls
    pieces, _ = run("direct", ['><tool_call>{"name": "f"}</tool_call>'], tools=False)
    assert collect(pieces)["calls"] == []


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("body,calls", [
    ('{"name": "f", "arguments": {"a": 1}}', [("f", '{"a": 1}')]),
    ('{"name": "f", "arguments": {"a": 1}', []),  # (unfinished: its text, without the turn)
])
def test_splitter_a_new_turn_inside_an_open_tool_call_ends_the_reply(whole, body, calls):
    """A new turn between ``<tool_call>`` and its closing tag ends the block and the reply
    (raw newlines are no JSON, so no call is ever cut): the splitter waited for the closing tag
    and let the turn through (the engine's own check misses "User" after a " \n\n" or "\n\n\n"
    token; session 53's review). What came before is taken as a block the model ended."""
    text = ">Sure. <tool_call>" + body + "\n\nUser: hi</tool_call> more"
    s = OutputSplitter("direct", tools=True)
    pieces = [p for piece in ([text] if whole else chars(text)) for p in s.feed(piece)]
    assert s.stopped
    pieces += s.finish("abort")
    got = collect(pieces)
    assert "User:" not in got["content"] and got["calls"] == calls, got
    assert got["content"] == ("Sure." if calls else "Sure. <tool_call>" + body), got


def test_splitter_inline_think():
    pieces, _ = run("think", chars(">why</think>\nok"), inline_think=True)
    texts = [p.text for p in pieces]
    assert all(p.kind == "content" for p in pieces)
    assert texts[0] == "<think>" and "".join(texts) == "<think>why</think>ok"
    pieces, _ = run("think", [">unfinished"], reason="length", inline_think=True)
    assert "".join(p.text for p in pieces) == "<think>unfinished</think>"
    # a new turn while reasoning ends the reply: the tag is closed there too (session 23's QA)
    for fed in (chars(">I think so\n\nUser: more"), [">I think so\n\nUser: more"]):
        pieces, _ = run("think", fed, reason="stop", inline_think=True)
        assert "".join(p.text for p in pieces) == "<think>I think so</think>"


def test_splitter_unicode_and_json_roundtrip():
    pieces, _ = run("direct", [">你好", "，世界 🌍"])
    assert json.loads(json.dumps(collect(pieces)["content"])) == "你好，世界 🌍"


def test_a_forced_tool_choice_describes_only_that_tool():
    """A ``tool_choice`` naming one function describes that tool only (a call of another is
    answer text, never a tool call; session 43's mutation review); ``auto`` describes all."""
    tools = parse_tools([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather"}},
        {"type": "function", "function": {"name": "get_time", "description": "Time"}}])
    forced = tools_instructions(tools, {"type": "function", "function": {"name": "get_time"}})
    assert '"name": "get_time"' in forced and '"name": "get_weather"' not in forced
    assert "You must call the tool get_time now." in forced
    both = tools_instructions(tools, "auto")
    assert '"name": "get_time"' in both and '"name": "get_weather"' in both
