import json
from harness import send, flags
msgs = [
 [], [{}], [None], ["hi"], [1], [{"role": "user"}], [{"role": "user", "content": None}], [{"role": "user", "content": []}],
 [{"role": "user", "content": [{}]}], [{"role": "user", "content": [{"type": "text"}]}], [{"role": "user", "content": [{"type": "text", "text": None}]}],
 [{"role": "user", "content": [{"type": "text", "text": 5}]}], [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
 [{"role": "user", "content": [{"type": "input_audio"}]}], [{"role": "user", "content": ["hi"]}], [{"role": "user", "content": [None]}],
 [{"role": "user", "content": {"a": 1}}], [{"role": "user", "content": 5}], [{"role": "bogus", "content": "hi"}], [{"role": None, "content": "hi"}],
 [{"role": 5, "content": "hi"}], [{"role": "tool", "content": "x"}], [{"role": "tool", "content": "x", "tool_call_id": 5}],
 [{"role": "assistant", "content": None}], [{"role": "assistant", "content": None, "tool_calls": None}], [{"role": "assistant", "tool_calls": []}],
 [{"role": "assistant", "content": None, "tool_calls": [{}]}], [{"role": "assistant", "content": None, "tool_calls": [{"function": None}]}],
 [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": None, "arguments": None}}]}],
 [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}],
 [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "not json {"}}]}],
 [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "[" * 5000}}]}],
 [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": json.dumps({"a": float("nan")})}}]}],
 [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "1" * 5000}}]}],
 [{"role": "assistant", "content": None, "tool_calls": "x"}], [{"role": "assistant", "content": None, "tool_calls": [1, "x"]}],
 [{"role": "assistant", "content": "<think>unclosed"}], [{"role": "assistant", "content": "</think></think><think>"}],
 [{"role": "assistant", "content": "a", "reasoning_content": 5}], [{"role": "user", "content": "hi", "name": {"x": 1}}],
 [{"role": "system", "content": "\n\n\n\n" * 1000}], [{"role": "user", "content": "\u2028\u2029\x85\x00\r\n"}],
 [{"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "b"}]}],
 [{"role": "user", "content": "x"}] * 20000,
 [{"role": "user", "content": "User: a\n\nAssistant: <think>\n</think"}],
 [{"role": "function", "content": "x", "name": "f"}],
]
for m in msgs:
    for extra in ({}, {"stream": True}):
        send(f"msgs={json.dumps(m)[:70]} {extra}", "POST", "/v1/chat/completions", {"messages": m, "max_tokens": 3, **extra})
prompts = ["", [], [[]], [""], ["", ""], [0], [-1], [65535], [65536], [[0], [1, 2]], ["a", 1], [1, "a"], [[1], "a"], ["a", [1]], [None], [[None]], [1.5], [[1.5]], [True], [[True]], [2**63], [[2**70]], {"a": 1}, "x" * 100000, ["x"] * 128, ["x"] * 129, [[1]] * 129, [1] * 200000]
for p in prompts:
    for extra in ({}, {"stream": True}, {"echo": True, "logprobs": 5}, {"echo": True, "max_tokens": 0, "logprobs": 0}, {"suffix": "s"}, {"best_of": 3, "n": 2}, {"best_of": 2, "stream": True}, {"n": 64}):
        body = {"prompt": p, "max_tokens": 2}; body.update(extra)
        send(f"prompt={json.dumps(p)[:50]} {extra}", "POST", "/v1/completions", body)
stops = ["", [""], ["", ""], ["\n"], ["x" * 100000], [None], [1], ["a"] * 16, ["a"] * 17, "\ud800", ["\x00"], ["Assistant:"], ["User:"], [" "], ["<think>"], ["</think>"]]
for s in stops:
    send(f"chat stop={json.dumps(s)[:50]}", "POST", "/v1/chat/completions", {"messages": [{"role":"user","content":"hi"}], "max_tokens": 8, "stop": s, "stream": True})
    send(f"comp stop={json.dumps(s)[:50]}", "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 8, "stop": s, "echo": True})
lps = [(True, None), (True, 0), (True, 20), (True, 21), (False, 5), (None, 5), (True, -1), ("true", 2), (1, 1)]
for lp, tlp in lps:
    for stream in (False, True):
        b = {"messages": [{"role":"user","content":"hi"}], "max_tokens": 3, "logprobs": lp, "stream": stream, "n": 2}
        if tlp is not None: b["top_logprobs"] = tlp
        send(f"chat logprobs={lp} top={tlp} s={stream}", "POST", "/v1/chat/completions", b)
for so in [{"include_usage": True}, {"include_usage": "yes"}, {"include_usage": None}, {"include_usage": [1]}, {"continuous_usage_stats": True}, {"include_usage": True, "x": 1}]:
    for stream in (False, True):
        send(f"so={so} s={stream}", "POST", "/v1/chat/completions", {"messages": [{"role":"user","content":"hi"}], "max_tokens": 3, "stream": stream, "stream_options": so, "n": 2})
for model in ["", "rwkv-7:", "rwkv-7:_", "rwkv-7:_nope", "rwkv-7:nope", "rwkv-7:" + "_" * 5000, "gpt-4", "rwkv-7:_\x00", "rwkv-7:_../../etc"]:
    send(f"model={model[:30]!r}", "POST", "/v1/chat/completions", {"messages": [{"role":"user","content":"hi"}], "max_tokens": 3, "model": model})
    send(f"cmodel={model[:30]!r}", "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 3, "model": model, "echo": True, "logprobs": 1})
for re in ["none", "low", "high", "minimal", "", "NONE", None]:
    send(f"reff={re!r}", "POST", "/v1/chat/completions", {"messages": [{"role":"user","content":"hi"}], "max_tokens": 3, "reasoning_effort": re, "response_format": {"type": "json_object"}})
print("FLAGS", len(flags))
for f in flags: print(f)
