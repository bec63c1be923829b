from common import *
import json
for label, schema in [("model_json_schema (additionalProperties omitted)", Small.model_json_schema()),
                      ("additionalProperties false", {**Small.model_json_schema(), "additionalProperties": False})]:
    r = client.chat.completions.create(model=M, messages=msgs(), max_tokens=200, seed=1,
        response_format={"type":"json_schema","json_schema":{"name":"Small","strict":True,"schema":schema}})
    c = r.choices[0]
    print(label, "| finish", c.finish_reason, "| tokens", r.usage.completion_tokens, "| content", repr(c.message.content[:120]))
    try: json.loads(c.message.content); print("  parses")
    except Exception as e: print("  json error", e)
