from qa import *
import random
def waitdone(tid):
    while True:
        j = c.get(f"/v1/tasks/{tid}/get_result").json()
        if j["finished"]: return j
        time.sleep(0.2)
p1 = f"User: first {random.random()}\n\nAssistant:"
wait_idle(); m0 = scrape()
tid = c.post("/v1/tasks/create", json={"prompt": p1, "max_tokens": 6}).json()["task_id"]; waitdone(tid)
wait_idle(); m1 = scrape(); d = delta(m0, m1)
print("create: prompt ntok", ntok(p1), "| prompt_tokens +%g generated +%g ttft +%g" % (d.get("rwkv_prompt_tokens_total", 0), d.get("rwkv_generated_tokens_total", 0), d.get("rwkv_time_to_first_token_seconds_count", 0)))
p2 = "\n\nUser: and then?\n\nAssistant:"
r = c.post(f"/v1/tasks/{tid}/continue", json={"prompt": p2, "max_tokens": 7}); print("continue", r.status_code)
waitdone(tid); wait_idle(); m2 = scrape(); d = delta(m1, m2)
st = c.get(f"/v1/tasks/{tid}/status").json()
print("continue: prompt ntok", ntok(p2), "| prompt_tokens +%g generated +%g (status generated_buf %d) ttft +%g" % (d.get("rwkv_prompt_tokens_total", 0), d.get("rwkv_generated_tokens_total", 0), st["generated_buf"], d.get("rwkv_time_to_first_token_seconds_count", 0)))
r = c.post(f"/v1/tasks/{tid}/continue", json={"max_tokens": 5}); print("continue w/o prompt", r.status_code)
waitdone(tid); wait_idle(); m3 = scrape(); d = delta(m2, m3)
print("continue no prompt | prompt_tokens +%g generated +%g ttft +%g" % (d.get("rwkv_prompt_tokens_total", 0), d.get("rwkv_generated_tokens_total", 0), d.get("rwkv_time_to_first_token_seconds_count", 0)))
p3 = "User: forked\n\nAssistant:"
r = c.post(f"/v1/tasks/{tid}/fork", json={"prompt": p3, "max_tokens": 4}); fid = r.json()["task_id"]; print("fork", r.status_code)
waitdone(fid); wait_idle(); m4 = scrape(); d = delta(m3, m4)
print("fork: prompt ntok", ntok(p3), "| prompt_tokens +%g generated +%g ttft +%g" % (d.get("rwkv_prompt_tokens_total", 0), d.get("rwkv_generated_tokens_total", 0), d.get("rwkv_time_to_first_token_seconds_count", 0)))
