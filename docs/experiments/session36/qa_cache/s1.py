import sys, json, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
def scenario(port, log):
    rng = random.Random(2024)
    words = "the of and 你好 世界 😀 naïve café Straße ```python\n def f(x):\n    return x\n``` lorem ipsum dolor sit amet 12345 ,.;: \t".split(" ")
    def rt(n): return " ".join(rng.choice(words) for _ in range(n))
    out = []
    def rec(name, v): out.append((name, v)); log.write(json.dumps([name, v], ensure_ascii=False) + "\n"); log.flush()
    # 1 growing multi-turn chat, greedy, think default & none
    for mode in ["none", None]:
        sysmsg = "You are a helpful assistant. " + rt(60)
        msgs = [{"role": "system", "content": sysmsg}]
        for turn in range(6):
            msgs.append({"role": "user", "content": rt(rng.randrange(3, 40))})
            kw = {"reasoning_effort": mode} if mode else {}
            r = chat(port, msgs, **kw); rec(f"chat-{mode}-{turn}", r)
            msgs.append({"role": "assistant", "content": (r[0] or "") if r[0] != "ERR" else ""})
        # resend same conversation (whole-prompt hit), seeded sampling
        r = chat(port, msgs[:-1], temperature=1.0, top_p=0.9, seed=7, **kw); rec(f"chat-{mode}-resend-seeded", r)
        r = chat(port, msgs[:-1], **kw); rec(f"chat-{mode}-resend-greedy", r)
        # edit last user message
        msgs2 = msgs[:-2] + [{"role": "user", "content": "edited " + rt(5)}]
        r = chat(port, msgs2, **kw); rec(f"chat-{mode}-edited", r)
    # 2 completions at odd boundaries
    P = rt(120)
    for k in sorted(rng.sample(range(1, len(P)), 25)) + [len(P)]:
        for samp in [dict(), dict(temperature=1.0, top_p=0.95, top_k=0, seed=123)]:
            r = comp(port, P[:k], **samp); rec(f"comp-prefix-{k}-{bool(samp)}", r)
    for ext in ["", " ", "\n\n", "你", "😀 more text here " + rt(30)]:
        r = comp(port, P + ext); rec(f"comp-ext-{ext[:5]!r}", r)
        r = comp(port, P + ext, temperature=0.8, seed=99); rec(f"comp-ext-seed-{ext[:5]!r}", r)
    # token-id prompts: prefix of P's tokens? use simple ids
    ids = [rng.randrange(1, 60000) for _ in range(200)]
    for k in [1, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200]:
        r = comp(port, ids[:k]); rec(f"comp-ids-{k}", r)
    for k in [200, 64, 33, 129]:
        r = comp(port, ids[:k], temperature=1.0, seed=5); rec(f"comp-ids-seed-{k}", r)
    # 3 penalties & stops on same prompt
    Q = "Story: " + rt(80)
    for pk in [dict(presence_penalty=0), dict(presence_penalty=2.0), dict(frequency_penalty=1.5), dict(presence_penalty=1, penalty_decay=0.9),
               dict(stop=["e"]), dict(stop=["\n", " the"]), dict(stop="a"), dict(temperature=1.3, top_k=5, seed=1), dict(temperature=0.5, top_p=0.5, seed=2, presence_penalty=0.5)]:
        r = comp(port, Q, **pk); rec(f"comp-pen-{pk}", r)
        r = comp(port, Q + " x", **pk); rec(f"comp-pen-ext-{pk}", r)
    # 4 chat vs completions overlap
    msgs = [{"role": "system", "content": "SYS " + rt(40)}, {"role": "user", "content": rt(20)}]
    r = chat(port, msgs, reasoning_effort="none"); rec("ov-chat", r)
    txt = "System: " + msgs[0]["content"] + "\n\nUser: " + msgs[1]["content"] + "\n\nAssistant:"
    for t in [txt, txt + " <think>\n</think", txt[:-5], "System: " + msgs[0]["content"] + "\n\n", txt + " hello"]:
        r = comp(port, t); rec(f"ov-comp-{len(t)}", r)
    r = chat(port, msgs, reasoning_effort="none"); rec("ov-chat2", r)
    r = chat(port, msgs, reasoning_effort="none", n=3, temperature=1, seed=11); rec("ov-chat-n3", r)
    # 5 echo / suffix(fim)
    r = comp(port, P[:50], suffix=" end of file"); rec("fim1", r)
    r = comp(port, P[:50], suffix=" end of file", temperature=1, seed=4); rec("fim2", r)
    return out
if __name__ == "__main__":
    port = int(sys.argv[1])
    with open(f"/tmp/qa_cache/s1_{port}.jsonl", "w") as f:
        scenario(port, f)
    print(port, "done", health(port))
