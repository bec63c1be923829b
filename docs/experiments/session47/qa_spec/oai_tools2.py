import httpx, json
U="http://localhost:8791/v1"
c=httpx.Client(timeout=120)
tools=[{"type":"function","function":{"name":"get_weather","description":"weather","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"],"additionalProperties":False}}},
       {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{},"additionalProperties":False}}}]
M=[{"role":"user","content":"Weather in Paris?"}]
for tc in [{"type":"function","function":{"name":"get_weather"}}, "required"]:
    b={"model":"x","messages":M,"tools":tools,"tool_choice":tc,"max_tokens":200,"seed":3,"reasoning_effort":"none"}
    r=c.post(U+"/chat/completions", json=b); print("== nonstream tool_choice", tc, r.status_code, r.text[:600])
    r=c.post(U+"/chat/completions", json={**b,"stream":True})
    evs=[l[6:] for l in r.text.split("\n\n") if l.startswith("data: ")]
    print("  last:", evs[-2:])
    calls=[]
    for e in evs[:-1]:
        d=json.loads(e)
        for ch in d["choices"]:
            if "tool_calls" in ch["delta"]:
                for t in ch["delta"]["tool_calls"]: calls.append(t)
    print("  tool deltas:", len(calls))
    for t in calls[:4]: print("   ", t)
    ids=[t for t in calls if "id" in t]; print("  with id:", len(ids), " all have index+function:", all("index" in t and "function" in t for t in calls), " name count:", sum("name" in t["function"] for t in calls), " type count:", sum("type" in t for t in calls))
    args="".join(t["function"].get("arguments","") for t in calls)
    print("  streamed args:", args[:200])
    try: json.loads(args); print("  args JSON ok")
    except Exception as ex: print("  args not JSON", ex)
