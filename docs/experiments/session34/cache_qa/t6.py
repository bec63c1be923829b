exec(open(__file__.rsplit("/", 1)[0] + "/qa.py").read())  # (ran as /tmp/qa34c/qa.py)
S = {"temperature": 1.0, "top_p": 0.9, "top_k": 50}
def comp(label, body, ep="/v1/completions"):
    ja, jb = both("POST", ep, body=body, label=label); cmp(label, ja, jb, body); return ja
base = "Once upon a time in a distant kingdom there lived " * 5
# multiple prompts in one request, nested prefixes
for k in range(2):
    comp(f"multi-prompt{k}", {"model": "rwkv-7", "prompt": [base, base + "a king", base + "a king who", "unrelated"], "max_tokens": 15, "seed": 4, **S})
    comp(f"multi-prompt-n2-{k}", {"model": "rwkv-7", "prompt": [base + "a queen", base + "a queen and"], "n": 2, "max_tokens": 15, "seed": 4, **S})
# echo, best_of
for k in range(2):
    comp(f"echo{k}", {"model": "rwkv-7", "prompt": base, "echo": True, "max_tokens": 10, "seed": 1, **S})
    comp(f"echo0-{k}", {"model": "rwkv-7", "prompt": base, "echo": True, "max_tokens": 0})
    comp(f"bestof{k}", {"model": "rwkv-7", "prompt": base, "best_of": 3, "n": 1, "max_tokens": 10, "seed": 1, **S})
# same seed, same prompt, n=4, repeated
for k in range(3):
    comp(f"n4-{k}", {"model": "rwkv-7", "prompt": base + "x", "n": 4, "max_tokens": 12, "seed": 99, **S})
# chat with max_completion_tokens and stop in reasoning mode
for k in range(2):
    comp(f"think-stop{k}", {"model": "rwkv-7", "messages": [{"role": "user", "content": "think"}], "max_completion_tokens": 80, "stop": ["a"], "seed": 2, **S}, "/v1/chat/completions")
print(stats); print("\n".join(findings))
