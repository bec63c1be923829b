from common import *
# n=2
r = client.chat.completions.parse(model=M, messages=msgs(), response_format=Small, max_tokens=200, n=2, seed=7)
print("n=2:", [(c.index, c.finish_reason, repr(c.message.parsed)[:60]) for c in r.choices], "usage", r.usage.completion_tokens)
# README: choice i draws with seed+i == choice 0 of request with that seed
r1 = client.chat.completions.parse(model=M, messages=msgs(), response_format=Small, max_tokens=200, seed=8)
print("choice1(seed7,n2) == choice0(seed8):", r.choices[1].message.content == r1.choices[0].message.content)
# seed determinism
outs = [client.chat.completions.create(model=M, messages=msgs(), response_format={"type":"json_object"}, max_tokens=60, seed=42, temperature=1.2).choices[0].message.content for _ in range(3)]
print("same seed x3 identical:", len(set(outs))==1, repr(outs[0][:80]))
o2 = client.chat.completions.create(model=M, messages=msgs(), response_format={"type":"json_object"}, max_tokens=60, seed=43, temperature=1.2).choices[0].message.content
print("seed 43 differs:", o2 != outs[0])
# concurrent determinism
import concurrent.futures as cf
with cf.ThreadPoolExecutor(3) as ex:
    par = list(ex.map(lambda _: client.chat.completions.create(model=M, messages=msgs(), response_format={"type":"json_object"}, max_tokens=60, seed=42, temperature=1.2).choices[0].message.content, range(3)))
print("concurrent same-seed identical to serial:", all(p==outs[0] for p in par))
# logprobs with response_format
for label, rf in [("schema", Small), ("json_object", {"type":"json_object"})]:
    fn = client.chat.completions.parse if label=="schema" else client.chat.completions.create
    r = fn(model=M, messages=msgs(), response_format=rf, max_tokens=120, seed=9, logprobs=True, top_logprobs=3)
    c = r.choices[0]; lp = c.logprobs.content
    toks = "".join(t.token for t in lp)
    finite = all(math.isfinite(t.logprob) for t in lp)
    tops_finite = all(math.isfinite(x.logprob) for t in lp for x in t.top_logprobs)
    ntop = {len(t.top_logprobs) for t in lp}
    chosen_not_top = sum(1 for t in lp if t.top_logprobs and t.logprob < t.top_logprobs[0].logprob - 1e-6)
    chosen_in_top = sum(1 for t in lp if any(x.token==t.token for x in t.top_logprobs))
    print(label, "finish", c.finish_reason, "usage", r.usage.completion_tokens, "lp entries", len(lp), "| joined tokens == content:", toks==c.message.content, "| startswith content:", toks.startswith(c.message.content))
    print("   all finite", finite, "tops finite", tops_finite, "top sizes", ntop, "tokens where chosen < top1 (grammar overrode model):", chosen_not_top, "chosen in top3:", chosen_in_top)
    print("   extra tokens beyond content:", repr(toks[len(c.message.content):]) if toks.startswith(c.message.content) else repr(toks[:100]))
    print("   sample", [(t.token, round(t.logprob,2), [(x.token, round(x.logprob,2)) for x in t.top_logprobs]) for t in lp[:4]])
    # bytes check
    print("   bytes ok:", all(t.bytes == list(t.token.encode()) for t in lp if not t.token.startswith("bytes:")))
# forced tool + logprobs
r = client.chat.completions.create(model=M, messages=msgs(), tools=[openai.pydantic_function_tool(Small)], tool_choice="required", max_tokens=120, seed=9, logprobs=True, top_logprobs=2)
lp=r.choices[0].logprobs.content
print("tool+logprobs: finish", r.choices[0].finish_reason, "entries", len(lp), "usage", r.usage.completion_tokens, "finite", all(math.isfinite(t.logprob) for t in lp), repr("".join(t.token for t in lp))[:120])
# streaming logprobs with rf
n=0; text=""; 
for ch in client.chat.completions.create(model=M, messages=msgs(), response_format={"type":"json_object"}, max_tokens=60, seed=9, logprobs=True, top_logprobs=1, stream=True):
    if ch.choices and ch.choices[0].logprobs and ch.choices[0].logprobs.content: n+=len(ch.choices[0].logprobs.content)
print("stream logprob entries", n)
