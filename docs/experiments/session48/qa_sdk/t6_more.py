from common import *
import collections
# n=2 stream helper with response_format
ev=collections.Counter()
with client.chat.completions.stream(model=M, messages=msgs(), response_format=Small, max_tokens=200, n=2, seed=7, stream_options={"include_usage":True}) as s:
    for e in s: ev[(e.type, getattr(e,'index',None))]+=1 if e.type!="chunk" else 0
    fc=s.get_final_completion()
print("n=2 stream:", sorted(k for k in ev), [(c.index, c.finish_reason, repr(c.message.parsed)[:50]) for c in fc.choices], "usage", fc.usage and fc.usage.completion_tokens)
# compare to non-stream n=2
r = client.chat.completions.parse(model=M, messages=msgs(), response_format=Small, max_tokens=200, n=2, seed=7)
print("stream == non-stream:", [c.message.content for c in fc.choices]==[c.message.content for c in r.choices])
# max_completion_tokens
try:
    r = client.chat.completions.parse(model=M, messages=msgs(), response_format=Person, max_completion_tokens=5, seed=1)
    print("max_completion_tokens=5: no exc", r.choices[0].finish_reason)
except openai.LengthFinishReasonError as e: print("max_completion_tokens=5: LengthFinishReasonError", e.completion.usage.completion_tokens)
# stream helper logprobs events
ev=collections.Counter(); lps=[]
with client.chat.completions.stream(model=M, messages=msgs(), response_format=Small, max_tokens=200, seed=9, logprobs=True, top_logprobs=2) as s:
    for e in s:
        ev[e.type]+=1
        if e.type=="logprobs.content.delta": lps+=e.content
    fc=s.get_final_completion()
c=fc.choices[0]
print("stream logprobs events:", dict(ev), "entries", len(lps), "final logprobs entries", len(c.logprobs.content) if c.logprobs else None, "usage?", fc.usage)
print("  first token", repr(lps[0].token), "content starts", repr(c.message.content[:5]))
# streamed forced tool call under max_tokens cut
try:
    with client.chat.completions.stream(model=M, messages=msgs(), tools=[openai.pydantic_function_tool(Small)], tool_choice="required", max_tokens=8, seed=3) as s:
        for e in s: pass
        print("tool stream cut: no exc")
except openai.LengthFinishReasonError as e:
    c=e.completion.choices[0]; print("tool stream cut: LengthFinishReasonError", c.finish_reason, repr(c.message.content), c.message.tool_calls)
# non-stream tool call: content None?
r = client.chat.completions.create(model=M, messages=msgs(), tools=[openai.pydantic_function_tool(Small)], tool_choice="required", max_tokens=200, seed=3)
print("non-stream tool content:", repr(r.choices[0].message.content), "| raw reasoning_content:", repr(getattr(r.choices[0].message,'reasoning_content',None)))
# 4 concurrent parse requests, all parse
import concurrent.futures as cf
def one(i):
    try: return type(client.chat.completions.parse(model=M, messages=msgs(), response_format=Person, max_tokens=300, seed=100+i, temperature=1.0).choices[0].message.parsed).__name__
    except Exception as e: return type(e).__name__
with cf.ThreadPoolExecutor(4) as ex: res=list(ex.map(one, range(12)))
print("12 seeds, 4 concurrent:", collections.Counter(res))
