"""Part 6: constrained rounds under greedy / min_p / top_k=1 / strong penalties."""
from h import *
f = open("/tmp/qa46c/qa/t6_sampling.out", "w")
P = "User: Give me a JSON record.\n\nAssistant:"
for extra in ({"temperature": 0}, {"min_p": 1}, {"min_p": 0.5}, {"top_k": 1}, {"top_p": 0.0},
              {"presence_penalty": 10, "repetition_penalty": 10, "penalty_decay": 1},
              {"temperature": 2, "top_k": 0, "top_p": 1}):
    for ep in ("/v1/tasks/tmp", "/v1/tasks/create"):
        s, j = post(ep, {"prompt": P, "max_tokens": 200, "seed": 9, "response_format": RF, **extra})
        r = wait(j["task_id"])[1]["result"] if s == 200 else j
        ok = s == 200 and parse_json(r)[0] and check_schema(parse_json(r)[1])
        log(f, f"{ep} {extra}: {s} valid={ok} {r!r:.120}")
    r = C.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}],
               "max_tokens": 200, "seed": 9, "response_format": RF, **extra})
    c = r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else r.text
    ok = r.status_code == 200 and parse_json(c)[0] and check_schema(parse_json(c)[1])
    log(f, f"chat {extra}: {r.status_code} valid={ok} {c!r:.120}")
