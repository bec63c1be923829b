from h import *
def tmp(body):
    s, j = post("/v1/tasks/tmp", body); assert s == 200, (s, j)
    return wait(j["task_id"])["result"]
def fimt(body):
    s, j = post("/v1/tasks/fim", body); assert s == 200, (s, j)
    return wait(j["task_id"])["result"]
cases = [("", "x = 1\n"), ("def f():\n", ""), ("naïve café ", " 日本🙂"), ("✿middle✿", "✿prefix✿"), ("line\n\n", "\n\nUser: hi")]
for pre, suf in cases:
    for extra in [{"temperature": 0}, {"temperature": 1, "seed": 99}]:
        N = 60
        d = fimt({"prefix": pre, "suffix": suf, "max_tokens": N, **extra})
        e = tmp({"prompt": fim(pre, suf), "max_tokens": N, **extra})
        s, j = post("/v1/completions", {"prompt": pre, "suffix": suf, "max_tokens": N, **extra})
        if s != 200: print("cmpl", s, j); continue
        c = j["choices"][0]["text"]
        st, ev, raw = sse("/v1/tasks/fim", {"prefix": pre, "suffix": suf, "max_tokens": N, "stream": True, **extra})
        sd = "".join(x.get("data", "") for x in ev if isinstance(x, dict))
        try: exp_pt = len(TOK.encode(fim(pre, suf) if suf else pre))
        except Exception as ex: exp_pt = repr(ex)
        print(repr(pre)[:20], repr(suf)[:20], extra.get("temperature"), "fim==tmp", d == e, "cmpl==fim", c == d, "stream==fim", sd == d, "pt", j["usage"]["prompt_tokens"], exp_pt, j["choices"][0]["finish_reason"], j["usage"]["completion_tokens"])
        if c != d: print("   c", repr(c[:80]), "\n   d", repr(d[:80]))
