from openai import OpenAI
c = OpenAI(base_url="http://localhost:8792/v1", api_key="sk-local")
r = c.completions.create(model="rwkv-7", prompt="Hello", max_tokens=10, n=2, stop=["\n\n"])
print("completions", r.object, [(ch.index, ch.finish_reason, type(ch.text).__name__) for ch in r.choices], r.usage)
r = c.chat.completions.create(model="rwkv-7", messages=[{"role":"user","content":"hi"}], max_completion_tokens=7, n=2, reasoning_effort="none", seed=1)
print("chat n=2", [(ch.index, ch.finish_reason, r.usage.completion_tokens) for ch in r.choices])
s = c.chat.completions.create(model="rwkv-7", messages=[{"role":"user","content":"hi"}], max_tokens=5, stream=True, stream_options={"include_usage": True}, reasoning_effort="none")
ch = list(s); print("stream chunks", len(ch), "last usage", ch[-1].usage, "last choices", ch[-1].choices, "roles", [x.choices[0].delta.role for x in ch if x.choices])
s = c.completions.create(model="rwkv-7", prompt="Hello", max_tokens=5, stream=True)
print("completion stream", [ (x.choices[0].text, x.choices[0].finish_reason) for x in s])
# same seed -> same output
a = c.chat.completions.create(model="rwkv-7", messages=[{"role":"user","content":"hi"}], max_tokens=20, seed=7, reasoning_effort="none", temperature=1.0, top_p=1.0).choices[0].message.content
b = c.chat.completions.create(model="rwkv-7", messages=[{"role":"user","content":"hi"}], max_tokens=20, seed=7, reasoning_effort="none", temperature=1.0, top_p=1.0).choices[0].message.content
print("seed reproducible", a == b)
