"""Part 7: a refused (422) continue/fork changes nothing; token-id prompts with a format."""
from h import *
f = open("/tmp/qa46c/qa/t7_422_side.out", "w")
P = "User: Give me a JSON record.\n\nAssistant:"
t = post("/v1/tasks/create", {"prompt": P, "max_tokens": 200, "seed": 1, "response_format": RF})[1]["task_id"]
before = wait(t)[1]
n_before = get("/v1/tasks/list?limit=10000")[1]["total_count"]
for body in ({"prompt": " x", "response_format": {"type": "xml"}}, {"prompt": " x", "logit_bias": {"1": 500}},
             {"prompt": " x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"x-guidance": "s"}}}}):
    log(f, "continue refused:", post(f"/v1/tasks/{t}/continue", body)[0], "fork refused:", post(f"/v1/tasks/{t}/fork", body)[0])
after = get(f"/v1/tasks/{t}/get_result")[1]
log(f, "result unchanged:", before == after, "status:", get(f"/v1/tasks/{t}/status")[1])
log(f, "task count unchanged:", n_before, get("/v1/tasks/list?limit=10000")[1]["total_count"])
post(f"/v1/tasks/{t}/continue", {"prompt": [11, 11, 7085, 59, 33], "max_tokens": 200, "response_format": RF})
r = wait(t)[1]["result"]
log(f, "continue with token-id prompt + rf:", parse_json(r)[:2])
