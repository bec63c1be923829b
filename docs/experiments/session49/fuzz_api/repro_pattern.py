"""A string "pattern" with a large bounded repeat compiles (no 400) but fails mid-reply: 500
("lexer error: too many expressions constructed")."""
import sys, httpx
B = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8792"
for pat in sys.argv[2:] or ["[^\"]{0,1000}", "[^\"]{0,10000}", "[^\"]{0,100000}"]:
    s = {"type": "object", "properties": {"a": {"type": "string", "pattern": pat}}, "required": ["a"]}
    codes, msg = [], ""
    for seed in range(3):
        r = httpx.post(B + "/v1/completions", json={"prompt": "x", "max_tokens": 16, "seed": seed, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": s}}}, timeout=60)
        codes.append(r.status_code)
        if r.status_code >= 500: msg = r.json()["error"]["message"][:100]
    print(repr(pat), codes, msg)
