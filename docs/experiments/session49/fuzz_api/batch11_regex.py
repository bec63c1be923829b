import json
from harness import send, flags
pats = ["(.*a){20}", "[\\s\\S]*a[\\s\\S]{30}", ".*a.{40}", "(a|aa)*b", "(a*)*b", "((a+)+)+b", "[a-z]{1,1000}[0-9]{1,1000}", "(x+x+)+y", "(\\w|\\d|[a-f])*q{50}", "(.{0,100}){100}",
        "(a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p){500}", "[^\"]{0,100000}", "\\u0000+", "(?i)abc", "a{0,4294967296}", "a{5,4}", "\\d{99999999999}"]
for p in pats:
    s = {"type": "object", "properties": {"a": {"type": "string", "pattern": p}}, "required": ["a"]}
    send(f"pat={p[:40]}", "POST", "/v1/completions", {"prompt": "x", "max_tokens": 16, "temperature": 1.5, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": s}}})
    send(f"tool-pat={p[:40]}", "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 16, "tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f", "parameters": s}}]})
print("FLAGS", len(flags))
for f in flags: print(f)
