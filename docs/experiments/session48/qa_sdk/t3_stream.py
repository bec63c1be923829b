from common import *
from t2_tools_defs import GetWeather
import collections, httpx
tool = openai.pydantic_function_tool(GetWeather)
def run(label, **kw):
    ev = collections.Counter(); deltas=[]; done=None; argdone=None
    try:
        with client.beta.chat.completions.stream(model=M, messages=msgs(), max_tokens=200, seed=5, **kw) as s:
            for e in s:
                ev[e.type]+=1
                if e.type=="content.delta": deltas.append(e.delta)
                if e.type=="content.done": done=(e.content[:80], type(e.parsed).__name__)
                if e.type=="tool_calls.function.arguments.done": argdone=(e.name, e.arguments[:80], type(e.parsed_arguments).__name__)
            fc = s.get_final_completion()
        c=fc.choices[0]
        print(label, dict(ev)); print("  content.done", done, "| args.done", argdone)
        print("  final finish", c.finish_reason, "parsed", type(c.message.parsed).__name__, "tool_calls", [(t.id, t.function.name, type(t.function.parsed_arguments).__name__) for t in c.message.tool_calls or []])
        if deltas: print("  joined deltas == content:", "".join(deltas)==c.message.content)
    except Exception as e: print(label, "EXC", type(e).__name__, str(e)[:300], dict(ev))
run("rf-beta", response_format=Person)
run("tool-named", tools=[tool], tool_choice={"type":"function","function":{"name":"GetWeather"}})
run("tool-required", tools=[tool], tool_choice="required")
# GA stream
try:
    with client.chat.completions.stream(model=M, messages=msgs(), max_tokens=200, seed=5, response_format=Person) as s:
        for e in s: pass
        print("ga stream parsed:", type(s.get_final_completion().choices[0].message.parsed).__name__)
except Exception as e: print("ga stream EXC", type(e).__name__, e)
# length in stream
try:
    with client.beta.chat.completions.stream(model=M, messages=msgs(), max_tokens=6, seed=5, response_format=Person) as s:
        for e in s: pass
        print("stream cut: no exc", s.get_final_completion().choices[0].finish_reason)
except openai.LengthFinishReasonError as e: print("stream cut: LengthFinishReasonError, finish", e.completion.choices[0].finish_reason)
except Exception as e: print("stream cut EXC", type(e).__name__, e)
# raw chunk audit
def raw(body):
    body = {"model":M,"messages":msgs(),"max_tokens":200,"seed":5,"stream":True, **body}
    chunks=[]
    with httpx.stream("POST","http://localhost:8791/v1/chat/completions", json=body, timeout=300) as r:
        print("  content-type", r.headers.get("content-type"))
        for line in r.iter_lines():
            if not line: continue
            if line.startswith(":"): continue
            assert line.startswith("data: "), line
            d=line[6:]
            if d=="[DONE]": chunks.append("DONE"); continue
            chunks.append(json.loads(d))
    return chunks
for label, body in [("rf", {"response_format":{"type":"json_schema","json_schema":{"name":"P","schema":Person.model_json_schema()}}}),
                    ("tool", {"tools":[tool],"tool_choice":"required"})]:
    ch = raw(body); js=[c for c in ch if c!="DONE"]
    print(label, "chunks", len(ch), "last is DONE", ch[-1]=="DONE", "ids same", len({c["id"] for c in js})==1, "created same", len({c["created"] for c in js})==1)
    print("  first delta", js[0]["choices"][0]["delta"], "| role count", sum("role" in c["choices"][0]["delta"] for c in js if c["choices"]))
    print("  last", js[-1])
    tcd=[d for c in js if c["choices"] for d in c["choices"][0]["delta"].get("tool_calls") or []]
    if tcd:
        print("  tool deltas", len(tcd), "all have index", all("index" in d for d in tcd), "all have function", all("function" in d for d in tcd),
              "id count", sum("id" in d and d["id"] is not None for d in tcd), "type count", sum(d.get("type") is not None for d in tcd), "name count", sum(d.get("function",{}).get("name") is not None for d in tcd))
        print("  first tool delta", tcd[0]); print("  second", tcd[1] if len(tcd)>1 else None)
