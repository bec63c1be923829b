import json
from harness import send, flags
MSG = [{"role": "user", "content": "hi"}]
vals = [None, True, False, 0, -1, 1.5, 1e308, -1e308, 2**64, -(2**63)-1, "x", "", "1", [], [1], {}, {"a": 1}, "\ud800"]
chat_fields = ["model","stream","stream_options","n","stop","seed","max_tokens","max_completion_tokens","temperature","top_p","min_p","top_k","presence_penalty","frequency_penalty","penalty_decay","logit_bias","response_format","reasoning_effort","tools","tool_choice","parallel_tool_calls","logprobs","top_logprobs","messages","user","functions","function_call"]
for f in chat_fields:
    for v in vals:
        body = {"messages": MSG, "max_tokens": 2}
        body[f] = v
        if f == "max_tokens" or f=="max_completion_tokens":
            pass
        send(f"chat {f}={v!r}"[:80], "POST", "/v1/chat/completions", body)
comp_fields = ["prompt","echo","suffix","best_of","logprobs","n","stop","seed","max_tokens","stream","logit_bias","response_format"]
for f in comp_fields:
    for v in vals:
        body = {"prompt": "hi", "max_tokens": 2}
        body[f] = v
        send(f"comp {f}={v!r}"[:80], "POST", "/v1/completions", body)
print("FLAGS", len(flags))
for f in flags: print(f)
