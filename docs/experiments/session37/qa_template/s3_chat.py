"""OpenAI chat/completions naming templates made several ways; multi-turn (replies fed back),
seeded / greedy, streaming, n>1; compared between the cache-on and cache-off servers.
argv[1]: prefill_chunk (0 = auto)."""
import sys
import time

from harness import (Cmp, Pair, as_template, chat, chat_stream, completion, create, export, fork,
                     toks)

chunk = int(sys.argv[1]) if len(sys.argv) > 1 else 0
p = Pair("s3", prefill_chunk=chunk)
cmp = Cmp()
print("prefill_chunk", chunk)

SYS = "System: You are a pirate who answers in riddles and never gives a straight answer. " * 3


def make_templates(c, tag):
    out = {}
    for L in (1, 31, 32, 33, 77):  # token-id prompts of these lengths
        t = create(c, toks(L, 10 + L), max_tokens=0)
        out[f"ids{L}"] = as_template(c, t["task_id"])
    t = create(c, SYS + "\n\n", max_tokens=0)
    out["sys"] = as_template(c, t["task_id"])
    g = create(c, SYS + "\n\nUser: hi\n\nAssistant:", max_tokens=9, temperature=0)
    out["generated"] = as_template(c, g["task_id"])
    # imported: the export of a prefill-only task, imported under a name
    data = export(c, create(c, toks(50, 5), max_tokens=0)["task_id"])
    r = c.post(f"/v1/tasks/import_state?name=_imp{tag}", content=data)
    assert r.status_code == 200, r.text
    out["imported"] = r.json()["task_id"]
    # template of a prefill-only fork of a template (keeps the first template's origin)
    f1 = fork(c, out["sys"], "User: remember the number 7.\n\nAssistant: ok\n\n", max_tokens=0)
    out["tpl_of_fork"] = as_template(c, f1["task_id"])
    return out


tpls = {side: make_templates(p.c[side], "") for side in ("on", "off")}
# the imported names are fixed: compare exported state of each template
questions = ["What is the capital of France?", "And of Spain? " * 5,
             "Tell me a story about a ship. " * 8, "Thanks.", "One more: why is the sea blue?"]


def convo(label, name, kw, n_turns=4, stream=False, pause=0.0):
    msgs = {"on": [], "off": []}
    for turn in range(n_turns):
        outs = {}
        for side in ("on", "off"):
            msgs[side].append({"role": "user", "content": questions[turn % len(questions)]})
            model = f"rwkv-7:{tpls[side][name]}"
            fn = chat_stream if stream else chat
            outs[side] = fn(p.c[side], model, msgs[side], **kw)
        cmp.eq(f"{label} turn{turn}", outs["on"], outs["off"])
        for side in ("on", "off"):
            reply = outs["on"][0] if isinstance(outs["on"], list) else "x"
            msgs[side].append({"role": "assistant", "content": reply})
        if pause:
            time.sleep(pause)


SEEDED = {"temperature": 1.0, "top_p": 1.0, "seed": 3, "max_tokens": 24}
GREEDY = {"temperature": 0, "max_tokens": 24}
for name in tpls["on"]:
    convo(f"{name} seeded", name, SEEDED, pause=0.3)
    convo(f"{name} seeded-fast", name, {**SEEDED, "seed": 4})
    convo(f"{name} greedy", name, GREEDY, n_turns=3, pause=0.3)
    convo(f"{name} stream", name, {**SEEDED, "seed": 5}, n_turns=3, stream=True, pause=0.3)
    convo(f"{name} n=3", name, {**SEEDED, "seed": 6, "n": 3}, n_turns=2)
    for i, prompt in enumerate(["Once upon a time", "x" * 200, " the"]):
        a = completion(p.c["on"], f"rwkv-7:{tpls['on'][name]}", prompt, **SEEDED)
        b = completion(p.c["off"], f"rwkv-7:{tpls['off'][name]}", prompt, **SEEDED)
        cmp.eq(f"{name} completion{i}", a, b)
    print(name, p.stats(), flush=True)
cmp.report()
p.close()
