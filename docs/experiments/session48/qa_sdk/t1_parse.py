from common import *
print("has chat.completions.parse:", hasattr(client.chat.completions, "parse"))
for fn_name, fn in [("beta", client.beta.chat.completions.parse), ("ga", client.chat.completions.parse)]:
    for model in (Small, Person):
        t=time.time()
        try:
            r = fn(model=M, messages=msgs(), response_format=model, max_tokens=200, seed=1, temperature=1.0)
            m = r.choices[0].message
            print(fn_name, model.__name__, "finish", r.choices[0].finish_reason, "parsed", type(m.parsed).__name__, repr(m.parsed)[:200], "refusal", m.refusal, "content", repr(m.content)[:200], "usage", r.usage.completion_tokens, f"{time.time()-t:.1f}s")
        except Exception as e:
            print(fn_name, model.__name__, "EXC", type(e).__name__, str(e)[:300])
# length cut
for mt in (3, 8):
    try:
        r = client.chat.completions.parse(model=M, messages=msgs(), response_format=Person, max_tokens=mt, seed=1)
        print("max_tokens", mt, "NO EXC", r.choices[0].finish_reason, r.choices[0].message.content)
    except openai.LengthFinishReasonError as e:
        c = e.completion.choices[0]
        print("max_tokens", mt, "LengthFinishReasonError ok; finish", c.finish_reason, "content", repr(c.message.content), "usage", e.completion.usage.completion_tokens)
    except Exception as e:
        print("max_tokens", mt, "EXC", type(e).__name__, str(e)[:300])
# raw json of a parse-like request to inspect fields
raw = client.chat.completions.with_raw_response.create(model=M, messages=msgs(), max_tokens=200, seed=1,
    response_format={"type":"json_schema","json_schema":{"name":"Small","strict":True,"schema":Small.model_json_schema()}})
print("raw:", raw.http_response.text[:800])
