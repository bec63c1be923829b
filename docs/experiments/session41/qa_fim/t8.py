from h import *
def fimt(body):
    s, j = post("/v1/tasks/fim", body)
    if s != 200: return s, j
    return s, wait(j["task_id"])
head = len(TOK.encode(fim("", "")))
print("fim overhead tokens", head)
for npre, nsuf in [(64 - head, 0), (65 - head, 0), (0, 64 - head), (0, 65 - head), (30, 30)]:
    pre, suf = "a " * npre, " b" * nsuf
    # adjust to exact counts
    for body in [{"prefix": pre, "suffix": suf, "max_tokens": 1}]:
        n = len(TOK.encode(fim(pre, suf)))
        s, j = fimt(body)
        s2, j2 = post("/v1/completions", {"prompt": pre, "suffix": suf, "max_tokens": 1})
        print("fim tokens", n, "| fim:", s, str(j)[:200], "| cmpl:", s2, str(j2)[:200])
# plain
for k in (63, 64, 65):
    s, j = post("/v1/completions", {"prompt": list(range(1, k + 1)), "max_tokens": 1}); print(k, s, str(j)[:160])
    s, j = post("/v1/tasks/tmp", {"prompt": list(range(1, k + 1)), "max_tokens": 1}); print(k, "tmp", s, str(j)[:160])
s, j = post("/v1/completions", {"prompt": ["a", list(range(1, 66))], "max_tokens": 1}); print("batch", s, str(j)[:200])
