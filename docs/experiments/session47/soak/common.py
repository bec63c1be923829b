"""Shared definitions for the soak: tools, schemas, request builders, SSE readers, validators."""
import copy
import json
import random

import httpx
import jsonschema

BASE = "http://127.0.0.1:8797"

# ---------------------------------------------------------------- tools
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"]}
LEG = {"type": "object", "properties": {
    "from": {"type": "string", "minLength": 3, "maxLength": 3},
    "to": {"type": "string", "minLength": 3, "maxLength": 3},
    "date": {"type": "string", "maxLength": 10}}, "required": ["from", "to", "date"]}

TOOLS = {
    "get_weather": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False},
    "book_flight": {"type": "object", "$defs": {"Person": PERSON, "Leg": LEG}, "properties": {
        "passenger": {"$ref": "#/$defs/Person"},
        "legs": {"type": "array", "items": {"$ref": "#/$defs/Leg"}, "minItems": 1, "maxItems": 2},
        "cabin": {"enum": ["economy", "business", "first"]}},
        "required": ["passenger", "legs", "cabin"]},
    "set_alarm": {"type": "object", "properties": {
        "time": {"type": "string", "maxLength": 5},
        "days": {"type": "array", "items": {"enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]},
                 "maxItems": 3},
        "enabled": {"type": "boolean"},
        "meta": {"type": "object", "properties": {
            "label": {"type": "string", "maxLength": 6},
            "volume": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["label", "volume"]}},
        "required": ["time", "enabled", "meta"]},
    "search_docs": {"type": "object", "properties": {
        "query": {"type": "string", "maxLength": 20},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "filters": {"type": "object", "properties": {"lang": {"enum": ["en", "fr", "de"]}},
                    "required": ["lang"]}},
        "required": ["query", "filters"]},
    "ping": {"type": "object", "properties": {}},
    "set_mode": {"type": "object", "$defs": {"Mode": {"const": "fast_forward_mode_constant_value"}},
                 "properties": {
                     "mode": {"$ref": "#/$defs/Mode"},
                     "level": {"enum": ["only_one_choice_here_for_sure"]},
                     "inner": {"type": "object", "properties": {
                         "fixed": {"const": "another_fixed_constant"},
                         "n": {"type": "integer", "minimum": 0, "maximum": 9}},
                         "required": ["fixed", "n"]}},
                 "required": ["mode", "level", "inner"]},
}


def tool_list(names):
    return [{"type": "function", "function": {"name": n, "description": f"the {n} tool",
                                              "parameters": TOOLS[n]}} for n in names]


# ---------------------------------------------------------------- response schemas
SCHEMAS = {
    "person": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
        "kind": {"enum": ["a", "b", "c"]}}, "required": ["name", "age", "kind"],
        "additionalProperties": False},
    "points": {"type": "object", "$defs": {"P": {"type": "object", "properties": {
        "x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}},
        "properties": {"p": {"$ref": "#/$defs/P"},
                       "q": {"type": "array", "items": {"$ref": "#/$defs/P"}, "maxItems": 2},
                       "ok": {"type": "boolean"}}, "required": ["p", "ok"]},
    "fixed": {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "object", "properties": {
            "c": {"enum": ["xyz_long_constant_value_here"]}}, "required": ["c"]}}, "required": ["b"]},
        "d": {"const": "fixed_value"},
        "e": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["a", "d", "e"], "additionalProperties": False},
    "small": {"type": "object", "properties": {
        "flag": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["flag", "n"]},
}


def rf_schema(name):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": SCHEMAS[name], "strict": True}}


BAD_TOOL_PARAMS = [
    {"type": "string"},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
    {"type": "array", "items": {"type": "integer"}},
]
BAD_RF = [
    {"type": "json_schema"},
    {"type": "json_schema", "json_schema": {"name": "x"}},
    {"type": "xml"},
    {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {
        "a": {"$ref": "#/definitions/nothing"}}}}},
    {"type": "json_schema", "json_schema": {"name": "x", "schema": "not a schema"}},
]

USER_MSGS = ["What is the weather in Paris?", "Book me a flight to Rome.", "Wake me at 7.",
             "Search the docs for fast-forward.", "ping", "Set the mode.", "Hello!",
             "Tell me something about RWKV and linear attention in three sentences."]

BIASES = [None, {"35": -100}, {"126": 100}, {"34436": 50, "27195": -50}, {"49": 20, "50": -20},
          {"388": -100, "5178": -100}]


def validate(instance, schema):
    """None if instance matches schema, else the error message."""
    try:
        jsonschema.validate(instance, schema, cls=jsonschema.Draft202012Validator)
        return None
    except jsonschema.ValidationError as e:
        return f"schema mismatch: {e.message} at {list(e.absolute_path)}"


# ---------------------------------------------------------------- SSE
async def sse_events(resp):
    """Yield decoded JSON (or the string '[DONE]') of each `data:` line."""
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            yield "[DONE]"
            continue
        yield json.loads(payload)


def empty_choice():
    return {"content": "", "reasoning": "", "tool_calls": {}, "finish_reason": None, "logprobs": []}


def accumulate_chat(choices, ev):
    for ch in ev.get("choices", []):
        c = choices.setdefault(ch["index"], empty_choice())
        d = ch.get("delta", {})
        if d.get("content"):
            c["content"] += d["content"]
        if d.get("reasoning_content"):
            c["reasoning"] += d["reasoning_content"]
        for tc in d.get("tool_calls") or []:
            t = c["tool_calls"].setdefault(tc["index"], {"name": None, "arguments": ""})
            fn = tc.get("function", {})
            if fn.get("name"):
                t["name"] = fn["name"]
            if fn.get("arguments"):
                t["arguments"] += fn["arguments"]
        if ch.get("finish_reason"):
            c["finish_reason"] = ch["finish_reason"]
        lp = ch.get("logprobs")
        if lp and lp.get("content"):
            c["logprobs"].extend(lp["content"])


def norm_chat_choice(ch):
    """A non-stream chat choice in the stream accumulator's form."""
    m = ch["message"]
    return {"content": m.get("content") or "", "reasoning": m.get("reasoning_content") or "",
            "tool_calls": {i: {"name": t["function"]["name"], "arguments": t["function"]["arguments"]}
                           for i, t in enumerate(m.get("tool_calls") or [])},
            "finish_reason": ch["finish_reason"],
            "logprobs": (ch.get("logprobs") or {}).get("content") or []}


def comparable(c):
    return (c["content"], c["reasoning"],
            tuple((t["name"], t["arguments"]) for _, t in sorted(c["tool_calls"].items())),
            c["finish_reason"])


LENGTH_WITH_CALL = []


def check_forced(c, tool_names, forced_name, max_tokens):
    """Problems (list of str) of a forced-call choice in accumulator form."""
    probs = []
    fr = c["finish_reason"]
    prefix = "<tool_call>{\"name\":\""
    if fr == "length":
        if c["tool_calls"]:
            # seen: a call whose JSON is complete but whose </tool_call> was cut comes back as a call
            # (README says content text): noted in notes.md, validated as a call here
            LENGTH_WITH_CALL.append(1)
            fr = "tool_calls"
    if fr == "length":
        txt = c["content"]
        if not (txt.startswith(prefix) or prefix.startswith(txt)):
            probs.append(f"length reply content is not a call's head: {txt[:80]!r}")
        if forced_name and len(txt) > len(prefix) + len(forced_name) and \
                not txt.startswith(prefix + forced_name + "\""):
            probs.append(f"length reply names another function: {txt[:80]!r}")
        return probs
    if fr != "tool_calls":
        return [f"finish_reason {fr!r} (expected tool_calls or length); content={c['content'][:120]!r}"]
    if c["content"]:
        probs.append(f"content beside tool_calls: {c['content'][:80]!r}")
    if c["reasoning"]:
        probs.append("reasoning before a forced call")
    if len(c["tool_calls"]) != 1:
        probs.append(f"{len(c['tool_calls'])} tool calls")
    for t in c["tool_calls"].values():
        if t["name"] not in tool_names:
            probs.append(f"unoffered function {t['name']!r}")
            continue
        if forced_name and t["name"] != forced_name:
            probs.append(f"called {t['name']} not the named {forced_name}")
        try:
            args = json.loads(t["arguments"])
        except Exception as e:
            probs.append(f"arguments do not parse ({e}): {t['arguments'][:200]!r}")
            continue
        err = validate(args, TOOLS[t["name"]])
        if err:
            probs.append(f"{t['name']} {err}: {t['arguments'][:200]}")
    return probs


def check_json_reply(text, fr, schema):
    if fr != "stop":
        return []
    try:
        obj = json.loads(text)
    except Exception as e:
        return [f"finish stop but text does not parse ({e}): {text[:200]!r}"]
    if schema is None:
        return [] if isinstance(obj, dict) else [f"json_object reply not an object: {text[:100]!r}"]
    err = validate(obj, schema)
    return [f"{err}: {text[:200]}"] if err else []
