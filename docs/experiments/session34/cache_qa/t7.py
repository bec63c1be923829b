exec(open(__file__.rsplit("/", 1)[0] + "/qa.py").read())  # (ran as /tmp/qa34c/qa.py)
S = {"temperature": 1.0, "top_p": 0.9, "top_k": 50}
msgs = [{"role": "system", "content": "Delay test system. " * 40}]
for t in range(8):
    msgs.append({"role": "user", "content": f"delayed turn {t}"})
    body = {"model": "rwkv-7", "messages": list(msgs), "max_tokens": 30, "seed": 300 + t, "reasoning_effort": "none", **S}
    ja, jb = chat(f"delay turn{t}", body)
    msgs.append({"role": "assistant", "content": ja["choices"][0]["message"]["content"] or ""})
    time.sleep(0.5)
# aborted stream then the same request
body = {"model": "rwkv-7", "messages": list(msgs) + [{"role": "user", "content": "abort me"}], "max_tokens": 200, "seed": 5, "reasoning_effort": "none", "stream": True, **S}
for c in (ca, cb):
    with c.stream("POST", "/v1/chat/completions", json=body) as r:
        for i, line in enumerate(r.iter_lines()):
            if i > 6: break
time.sleep(1)
b2 = dict(body, stream=False)
chat("after-abort", b2)
# next turn extending the aborted one's prompt
chat("after-abort-next", dict(b2, messages=b2["messages"] + [{"role": "assistant", "content": "partial"}, {"role": "user", "content": "again"}]))
print(stats); print("\n".join(findings))
