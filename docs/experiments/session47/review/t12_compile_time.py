import time, json
import sys; sys.path.insert(0, "/tmp/qa_review/repo")
from server.api.response_format import response_grammar
for n in [6000, 9000, 12000, 15000]:
    s = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": "[a-z]{3}[0-9]+"} for i in range(n)}}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}
    t = time.time()
    try: response_grammar(fmt, ">"); r = "ok"
    except Exception as e: r = type(e).__name__ + str(e)[:100]
    print(n, "props body", len(json.dumps(fmt)), "bytes ->", f"{time.time()-t:.2f}s", r)
