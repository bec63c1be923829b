from common import *
def show(label, f):
    try: print(label, "->", f())
    except openai.APIStatusError as e: print(label, "-> HTTP", e.status_code, json.dumps(e.body)[:300])
    except Exception as e: print(label, "-> EXC", type(e).__name__, str(e)[:300])
tool = openai.pydantic_function_tool(Small)
show("n=2 forced tool", lambda: [(c.index, c.finish_reason, [t.function.arguments[:40] for t in c.message.tool_calls or []]) for c in client.chat.completions.parse(model=M, messages=msgs(), tools=[tool], tool_choice="required", n=2, max_tokens=200, seed=4).choices])
show("n=2 logprobs rf", lambda: [(c.index, len(c.logprobs.content), c.finish_reason) for c in client.chat.completions.create(model=M, messages=msgs(), response_format={"type":"json_object"}, n=2, max_tokens=30, seed=4, logprobs=True, top_logprobs=1).choices])
show("no seed twice differ (temp 1)", lambda: len({client.chat.completions.create(model=M, messages=msgs(), response_format={"type":"json_schema","json_schema":{"name":"S","schema":openai.lib._pydantic.to_strict_json_schema(Small)}}, max_tokens=100, temperature=1.0).choices[0].message.content for _ in range(3)}))
show("temperature 0 twice same", lambda: len({client.chat.completions.create(model=M, messages=msgs(), response_format={"type":"json_object"}, max_tokens=40, temperature=0).choices[0].message.content for _ in range(2)}))
show("top_logprobs without logprobs", lambda: client.chat.completions.create(model=M, messages=msgs(), max_tokens=5, top_logprobs=2))
show("top_logprobs 21", lambda: client.chat.completions.create(model=M, messages=msgs(), max_tokens=5, logprobs=True, top_logprobs=21))
show("hand-written strict tool w/o additionalProperties", lambda: [t.function.arguments for t in client.chat.completions.create(model=M, messages=msgs(), tools=[{"type":"function","function":{"name":"g","strict":True,"parameters":{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}}}], tool_choice="required", max_tokens=100, seed=4).choices[0].message.tool_calls or []])
show("tool_choice function via parse + two tools, parallel false", lambda: [(t.function.name, type(t.function.parsed_arguments).__name__) for t in client.chat.completions.parse(model=M, messages=msgs(), tools=[tool, openai.pydantic_function_tool(Addr)], tool_choice={"type":"function","function":{"name":"Addr"}}, parallel_tool_calls=False, max_tokens=200, seed=4).choices[0].message.tool_calls])
