"""A plain JSON-schema string with a large maxLength fails mid-reply with a 500
("lexer error: too many expressions constructed")."""
import sys, httpx
B = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8792"
for ml in (int(a) for a in sys.argv[2:] or ["1000", "10000", "100000"]):
    s = {"type": "object", "properties": {"a": {"type": "string", "maxLength": ml}}, "required": ["a"]}
    codes = []
    for seed in range(3):
        r = httpx.post(B + "/v1/completions", json={"prompt": "x", "max_tokens": 16, "seed": seed, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": s}}}, timeout=60)
        codes.append(r.status_code)
        if r.status_code >= 500: msg = r.json()["error"]["message"][:110]
    print("maxLength", ml, codes, msg if any(c >= 500 for c in codes) else "")
