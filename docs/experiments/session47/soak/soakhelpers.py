import json
from common import sse_events, accumulate_chat, empty_choice, norm_chat_choice
async def post(cl, URL, path, body):
    if body.get("stream"):
        choices = {}
        async with cl.stream("POST", URL + path, json=body) as resp:
            async for ev in sse_events(resp):
                if ev == "[DONE]" or "error" in ev: continue
                if path.endswith("chat/completions"): accumulate_chat(choices, ev)
                else:
                    for ch in ev.get("choices", []):
                        c = choices.setdefault(ch["index"], empty_choice()); c["content"] += ch.get("text") or ""
                        if ch.get("finish_reason"): c["finish_reason"] = ch["finish_reason"]
        return 200, choices, None, None
    j = (await cl.post(URL + path, json=body)).json()
    if path.endswith("chat/completions"):
        return 200, {c["index"]: norm_chat_choice(c) for c in j["choices"]}, j, j["usage"]
    return 200, {c["index"]: {"content": c["text"], "reasoning": "", "tool_calls": {}, "finish_reason": c["finish_reason"]} for c in j["choices"]}, j, j["usage"]
