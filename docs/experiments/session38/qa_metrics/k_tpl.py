from qa import *
import random
p = "User: You are a precise technical translator who translates everything.\n\nAssistant: Understood.\n\n" * 3
tid = c.post("/v1/tasks/create", json={"prompt": p, "max_tokens": 0}).json()["task_id"]
tpl = c.post(f"/v1/tasks/{tid}/as_template").json()["task_id"]
for label, model in (("template", f"rwkv-7:{tpl}"), ("plain", "rwkv-7")):
    msgs = []
    for t in range(4):
        msgs.append({"role": "user", "content": f"Translate sentence {t}: " + "the weather is nice today and the sun shines. " * 4 + str(random.random())})
        wait_idle(); h0 = health()["prefix_cache"]
        r, dt = chat(msgs, model=model, max_tokens=40, temperature=0)
        j = r.json(); msgs.append({"role": "assistant", "content": j["choices"][0]["message"]["content"] or ""})
        time.sleep(0.5); wait_idle(); h1 = health()["prefix_cache"]
        print(label, "turn", t, "prompt", j["usage"]["prompt_tokens"], "hit +%d miss +%d saved +%d prefilled +%d warm +%d" % tuple(h1[k] - h0[k] for k in ("hits", "misses", "tokens_saved", "prefilled_tokens", "warm_tokens")))
