"""Part 1: Task API rounds with logit_bias / response_format."""
import json, sys
from h import *

f = open("/tmp/qa46c/qa/t1_tasks.out", "w")
P = "User: Give me a JSON record.\n\nAssistant:"
results = {}


def constrained_ok(text, schema=True):
    ok, obj, lead = parse_json(text)
    return ok and (check_schema(obj) if schema else isinstance(obj, dict)), obj, lead


def round_(path, body, label, expect_constrained, schema=True):
    s, j = post(path, body)
    if s != 200:
        log(f, label, "HTTP", s, j)
        return None
    tid = j["task_id"]
    s, r = wait(tid)
    txt = r["result"] if isinstance(r, dict) else r
    ok, obj, lead = constrained_ok(txt, schema)
    st = get(f"/v1/tasks/{tid}/status")[1]
    verdict = "OK" if ok == expect_constrained else "UNEXPECTED"
    log(f, f"[{verdict}] {label}: tid={tid} constrained_parse={ok} lead={lead} status={st} "
           f"text={txt!r:.200} obj={obj!r:.120}")
    return tid


# 1. tmp/create/fim constrained
for path in ("/v1/tasks/tmp", "/v1/tasks/create"):
    for seed in (1, 2, 3):
        round_(path, {"prompt": P, "max_tokens": 200, "seed": seed, "response_format": RF},
               f"{path} schema seed={seed}", True)
round_("/v1/tasks/create", {"prompt": P, "max_tokens": 200, "seed": 5, "response_format": RF_OBJ},
       "create json_object", True, schema=False)
round_("/v1/tasks/fim", {"prefix": "x = ", "suffix": "\nprint(x)", "max_tokens": 200, "seed": 1,
                         "response_format": RF}, "fim schema", True)

# 2. create constrained, continue free, continue constrained, fork free, fork tmp free
tid = round_("/v1/tasks/create", {"prompt": P, "max_tokens": 200, "seed": 7, "response_format": RF},
             "chain create", True)
round_(f"/v1/tasks/{tid}/continue", {"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 40},
       "chain continue free (prompt)", False)
round_(f"/v1/tasks/{tid}/continue", {"prompt": "\n\nUser: again json\n\nAssistant:",
                                      "max_tokens": 200, "response_format": RF},
       "chain continue constrained", True)
round_(f"/v1/tasks/{tid}/continue", {"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 40},
       "chain continue free again", False)
# constrained then fork (no fields): free
round_(f"/v1/tasks/{tid}/continue", {"prompt": "\n\nUser: json\n\nAssistant:",
                                      "max_tokens": 200, "response_format": RF},
       "chain continue constrained 2", True)
fk = round_(f"/v1/tasks/{tid}/fork", {"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 40},
            "fork free of constrained source", False)
fk2 = round_(f"/v1/tasks/{tid}/fork?tmp=true", {"prompt": "\n\nUser: more\n\nAssistant:",
                                                 "max_tokens": 40},
             "fork tmp free of constrained source", False)
round_(f"/v1/tasks/{tid}/fork?tmp=true", {"prompt": "\n\nUser: j\n\nAssistant:", "max_tokens": 200,
                                           "response_format": RF},
       "fork tmp constrained", True)
round_(f"/v1/tasks/{tid}/fork", {"prompt": "\n\nUser: j\n\nAssistant:", "max_tokens": 200,
                                  "response_format": RF},
       "fork constrained", True)
# continue with no prompt after constrained round (README: ends at once; needs a prompt)
s, j = post(f"/v1/tasks/{tid}/continue", {"max_tokens": 20, "response_format": RF})
s2, r = wait(j["task_id"]) if s == 200 else (s, j)
log(f, "continue without prompt after constrained, constrained again:", s, r)
s, j = post(f"/v1/tasks/{tid}/continue", {"max_tokens": 20})
s2, r = wait(j["task_id"]) if s == 200 else (s, j)
log(f, "continue without prompt, free:", s, r)
# logit_bias round only: ban/force a token
tok = 11  # some token id
s, j = post("/v1/tasks/tmp", {"prompt": P, "max_tokens": 10, "seed": 3, "logit_bias": {"33": 100}})
s2, r = wait(j["task_id"])
log(f, "tmp logit_bias 33:+100 ->", s, r.get("result") if isinstance(r, dict) else r)
tid2 = post("/v1/tasks/create", {"prompt": P, "max_tokens": 10, "seed": 3,
                                 "logit_bias": {"33": 100}})[1]["task_id"]
log(f, "create logit_bias 33:+100 ->", wait(tid2)[1]["result"][:80])
post(f"/v1/tasks/{tid2}/continue", {"prompt": " and", "max_tokens": 10})
log(f, "  continue w/o bias ->", repr(wait(tid2)[1]["result"][:80]))
post(f"/v1/tasks/{tid2}/continue", {"prompt": " and", "max_tokens": 10, "logit_bias": {"33": 100}})
log(f, "  continue with bias again ->", repr(wait(tid2)[1]["result"][:80]))
fk = post(f"/v1/tasks/{tid2}/fork", {"prompt": " and", "max_tokens": 10})[1]["task_id"]
log(f, "  fork w/o bias ->", repr(wait(fk)[1]["result"][:80]))
json.dump({"chain": tid, "bias": tid2}, open("/tmp/qa46c/qa/t1_ids.json", "w"))
