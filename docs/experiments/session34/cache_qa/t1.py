exec(open(__file__.rsplit("/", 1)[0] + "/qa.py").read())  # (ran as /tmp/qa34c/qa.py)
import random
SYS = "You are a meticulous assistant. " * 40
def multiturn(label, n_turns, sampling, sys_prompt=None, effort="none", max_tokens=40, seed_base=100):
    msgs = [{"role": "system", "content": sys_prompt}] if sys_prompt else []
    for t in range(n_turns):
        msgs.append({"role": "user", "content": f"Turn {t}: tell me about topic {t*7} please."})
        body = {"model": "rwkv-7", "messages": list(msgs), "max_tokens": max_tokens, **sampling}
        if effort: body["reasoning_effort"] = effort
        if "seed" in sampling: body["seed"] = seed_base + t
        ja, jb = chat(f"{label} turn{t}", body)
        m = msg_of(ja)
        msgs.append({"role": "assistant", "content": m.get("content") or ""})
        yield
SEEDED = {"temperature": 1.0, "top_p": 0.9, "top_k": 50, "seed": 0}
GREEDY = {"temperature": 0}
# 1: seeded multi-turn, effort none
for _ in multiturn("seeded-none", 8, SEEDED): pass
# 2: greedy multi-turn
for _ in multiturn("greedy-none", 8, GREEDY): pass
# 3: seeded with reasoning (default think)
for _ in multiturn("seeded-think", 6, SEEDED, effort=None, max_tokens=60): pass
# 4: interleaved chats sharing long system prompt
gens = [multiturn(f"sys-ilv{k}", 7, SEEDED if k % 2 == 0 else GREEDY, sys_prompt=SYS, seed_base=1000*k) for k in range(3)]
for step in range(7):
    for g in gens: next(g)
print(stats); print("\n".join(findings))
