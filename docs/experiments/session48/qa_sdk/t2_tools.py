from common import *
class GetWeather(BaseModel):
    """Get the weather for a city"""
    city: Literal["Paris", "Rome", "Oslo"]
    unit: Literal["c", "f"]
    addr: Addr
    days: List[int] = Field(max_length=2)
tool = openai.pydantic_function_tool(GetWeather)
print("tool def:", json.dumps(tool)[:400])
class Other(BaseModel):
    q: Literal["yes", "no"]
tool2 = openai.pydantic_function_tool(Other)
for label, tc in [("named", {"type":"function","function":{"name":"GetWeather"}}), ("required", "required")]:
    for fn_name, fn in [("beta", client.beta.chat.completions.parse), ("ga", client.chat.completions.parse)]:
        try:
            r = fn(model=M, messages=msgs("weather in Paris?"), tools=[tool, tool2], tool_choice=tc, max_tokens=200, seed=3)
            c = r.choices[0]; m = c.message
            print(label, fn_name, "finish", c.finish_reason, "content", repr(m.content), "n_calls", len(m.tool_calls or []))
            for t in m.tool_calls or []:
                print("   id", t.id, "type", t.type, "name", t.function.name, "args", t.function.arguments[:150], "parsed_arguments", repr(t.function.parsed_arguments)[:200])
        except Exception as e:
            print(label, fn_name, "EXC", type(e).__name__, str(e)[:300])
# strict False (non-strict tool): parse() requires strict for parsed_arguments
nonstrict = json.loads(json.dumps(tool)); nonstrict["function"]["strict"] = False
try:
    r = client.chat.completions.parse(model=M, messages=msgs(), tools=[nonstrict], tool_choice="required", max_tokens=200, seed=3)
    print("non-strict parse: finish", r.choices[0].finish_reason, [ (t.function.name, t.function.arguments[:80], getattr(t.function,'parsed_arguments',None)) for t in r.choices[0].message.tool_calls or []])
except Exception as e: print("non-strict EXC", type(e).__name__, str(e)[:300])
# max_tokens cut of forced tool call
try:
    r = client.chat.completions.parse(model=M, messages=msgs(), tools=[tool], tool_choice="required", max_tokens=10, seed=3)
    print("cut: NO EXC", r.choices[0].finish_reason, repr(r.choices[0].message.content), r.choices[0].message.tool_calls)
except openai.LengthFinishReasonError as e:
    c = e.completion.choices[0]; print("cut: LengthFinishReasonError finish", c.finish_reason, repr(c.message.content), c.message.tool_calls)
except Exception as e: print("cut EXC", type(e).__name__, str(e)[:300])
# parallel_tool_calls false + auto
r = client.chat.completions.create(model=M, messages=msgs(), tools=[tool], tool_choice="auto", parallel_tool_calls=False, max_tokens=60, seed=3, extra_body={"reasoning_effort":"none"})
print("auto:", r.choices[0].finish_reason, repr(r.choices[0].message.content)[:100], r.choices[0].message.tool_calls)
# tool call round trip follow-up
r = client.chat.completions.create(model=M, messages=msgs("weather?"), tools=[tool], tool_choice="required", max_tokens=200, seed=3)
tc0 = r.choices[0].message.tool_calls[0]
r2 = client.chat.completions.create(model=M, max_tokens=20, extra_body={"reasoning_effort":"none"}, tools=[tool], messages=msgs("weather?")+[r.choices[0].message.model_dump(exclude_none=True), {"role":"tool","tool_call_id":tc0.id,"content":"sunny"}])
print("follow-up ok:", r2.choices[0].finish_reason, repr(r2.choices[0].message.content)[:60])
