from qa import *
import random
KEYS = ["rwkv_prompt_tokens_total", "rwkv_generated_tokens_total", "rwkv_prefill_tokens_total", "rwkv_prefill_calls_total",
        "rwkv_prefill_later_tokens_total", "rwkv_prefill_boundaries_kept_total", "rwkv_prefill_warm_tokens_total", "rwkv_prefill_warm_dropped_total",
        "rwkv_prefix_cache_hits_total", "rwkv_prefix_cache_misses_total", "rwkv_prefix_cache_tokens_saved_total",
        "rwkv_prefix_cache_evictions_total", "rwkv_time_to_first_token_seconds_count", "rwkv_time_per_output_token_seconds_count"]
HK = {"rwkv_prefix_cache_hits_total": "hits", "rwkv_prefix_cache_misses_total": "misses", "rwkv_prefix_cache_tokens_saved_total": "tokens_saved",
      "rwkv_prefix_cache_evictions_total": "evictions", "rwkv_prefill_tokens_total": "prefilled_tokens", "rwkv_prefill_calls_total": "prefill_calls",
      "rwkv_prefill_later_tokens_total": "later_tokens", "rwkv_prefill_boundaries_kept_total": "boundaries_kept",
      "rwkv_prefill_warm_tokens_total": "warm_tokens", "rwkv_prefill_warm_dropped_total": "warm_dropped"}
def step(name, fn):
    wait_idle(); m0 = scrape(); h0 = health()["prefix_cache"]
    truth = fn()
    wait_idle(); time.sleep(0.3); m1 = scrape(); h1 = health()["prefix_cache"]
    d = delta(m0, m1)
    print(f"== {name}: truth {truth}")
    print("   metric deltas:", {k.replace('rwkv_', ''): d.get(k, 0) for k in KEYS if d.get(k, 0)})
    for k, hk in HK.items():
        if d.get(k, 0) != h1[hk] - h0[hk]:
            print(f"   <-- /metrics {k} delta {d.get(k,0)} != /health {hk} delta {h1[hk]-h0[hk]}")
    for g in ["entries", "bytes", "device_bytes", "max_bytes"]:
        if m1[f"rwkv_prefix_cache_{g}"] != h1[g]:
            print(f"   <-- gauge {g}: metrics {m1[f'rwkv_prefix_cache_{g}']} health {h1[g]}")
    print("   gauges: entries", m1["rwkv_prefix_cache_entries"], "bytes", m1["rwkv_prefix_cache_bytes"], "device_bytes", m1["rwkv_prefix_cache_device_bytes"])
    return d

SYS = "You are a meticulous assistant who answers in detail. " * 8
def multiturn():
    msgs = [{"role": "system", "content": SYS}]; up = ug = 0; out = []
    for t in range(4):
        msgs.append({"role": "user", "content": f"Turn {t}: tell me about topic {random.randint(0, 10**6)}."})
        r, dt = chat(msgs, max_tokens=20, temperature=0)
        j = r.json(); u = j["usage"]; up += u["prompt_tokens"]; ug += u["completion_tokens"]
        msgs.append({"role": "assistant", "content": j["choices"][0]["message"]["content"] or ""})
        out.append(u["prompt_tokens"]); time.sleep(0.3)
    return dict(usage_prompt=up, usage_completion=ug, per_turn_prompt=out, tasks=4)
step("multi-turn chat (4 turns, history resent)", multiturn)

def shared():
    up = ug = 0
    sysp = "Shared system prompt for the QA metrics check, long enough to be cached. " * 6
    for i in range(3):
        r, dt = chat([{"role": "system", "content": sysp}, {"role": "user", "content": f"user {i} {random.random()}"}], max_tokens=8)
        u = r.json()["usage"]; up += u["prompt_tokens"]; ug += u["completion_tokens"]
    return dict(usage_prompt=up, usage_completion=ug, tasks=3)
step("3 chats sharing a system prompt", shared)

def repeated():
    up = ug = 0; p = "A repeated identical prompt for metrics: " + "lorem ipsum dolor sit amet " * 10
    for i in range(3):
        r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": p, "max_tokens": 6})
        u = r.json()["usage"]; up += u["prompt_tokens"]; ug += u["completion_tokens"]
    return dict(usage_prompt=up, usage_completion=ug, tasks=3, ntok=ntok(p))
step("3 identical completions", repeated)

state = {}
def template():
    p = "User: You are a precise technical translator who translates everything.\n\nAssistant: Understood.\n\n" * 3
    r = c.post("/v1/tasks/create", json={"prompt": p, "max_tokens": 0}); j = r.json(); print("   create:", r.status_code, j)
    state["task"] = j["task_id"]; state["ptok"] = ntok(p)
    return dict(prompt_tokens=ntok(p), generated=0)
step("Task API create max_tokens 0", template)

def as_tpl():
    r = c.post(f"/v1/tasks/{state['task']}/as_template"); j = r.json(); print("   as_template:", r.status_code, j)
    state["tpl"] = j["task_id"]
    return "no tokens expected"
step("as_template", as_tpl)

def tpl_chat():
    msgs = []; up = ug = 0; per = []
    for t in range(3):
        msgs.append({"role": "user", "content": f"Translate sentence {t}: the weather is nice today {random.random()}"})
        r, dt = chat(msgs, model=f"rwkv-7:{state['tpl']}", max_tokens=12, temperature=0)
        j = r.json(); assert r.status_code == 200, r.text
        u = j["usage"]; up += u["prompt_tokens"]; ug += u["completion_tokens"]; per.append(u["prompt_tokens"])
        msgs.append({"role": "assistant", "content": j["choices"][0]["message"]["content"] or ""})
        time.sleep(0.3)
    return dict(usage_prompt=up, usage_completion=ug, per_turn=per, tasks=3)
step("3-turn chat from template", tpl_chat)
