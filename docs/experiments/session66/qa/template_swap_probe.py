"""A template deleted and re-imported under the same name with another state: do chats naming
`rwkv-7:_swap` get the new state, not the old one from the prefix cache? (item 2)
    uv run python docs/experiments/session66/qa/template_swap_probe.py http://localhost:8811
"""
import io, sys, time
import httpx, torch

URL = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8811"
c = httpx.Client(base_url=URL, timeout=60)
tag = str(int(time.time()))


def state(seed):
    g = torch.Generator().manual_seed(seed)
    b = io.BytesIO(); torch.save({f"blocks.{i}.att.time_state": torch.randn(2, 64, 64, generator=g) for i in range(2)}, b)
    return b.getvalue()


msgs = [{"role": "system", "content": "You are a helpful assistant. " * 20},
        {"role": "user", "content": "Tell me about the sea. " * 10}]


def chat(model, m):
    r = c.post("/v1/chat/completions", json={"model": model, "messages": m, "max_tokens": 12, "temperature": 0,
                                             "reasoning_effort": "none"})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


name = f"swap{tag}"
print(c.post(f"/v1/tasks/import_state?name={name}", content=state(1)).status_code)
a1 = chat(f"rwkv-7:_{name}", msgs)
m2 = msgs + [{"role": "assistant", "content": a1}, {"role": "user", "content": "And the mountains? " * 10}]
a2 = chat(f"rwkv-7:_{name}", m2)
print("delete:", c.post(f"/v1/tasks/_{name}/delete?force=true").status_code)
print("reimport:", c.post(f"/v1/tasks/import_state?name={name}", content=state(2)).status_code)
b1 = chat(f"rwkv-7:_{name}", msgs)
b2 = chat(f"rwkv-7:_{name}", m2)
print("ref import:", c.post(f"/v1/tasks/import_state?name={name}ref", content=state(2)).status_code)
time.sleep(0.5)
r1 = chat(f"rwkv-7:_{name}ref", msgs)
r2 = chat(f"rwkv-7:_{name}ref", m2)
print("old state turn1/2:", repr(a1), repr(a2))
print("new state turn1/2:", repr(b1), repr(b2))
print("ref (fresh name): ", repr(r1), repr(r2))
print("re-imported template serves the new state:", b1 == r1 and b2 == r2)
# same with the Task API fork
import json
f = lambda t: "".join(json.loads(l[6:]).get("data", "") for l in c.post(f"/v1/tasks/{t}/fork?tmp=true", json={
    "prompt": "User: hi\n\nAssistant:", "max_tokens": 8, "temperature": 0, "stream": True}).text.splitlines()
    if l.startswith("data: {"))  # (text only: the events carry each fork's own task_id)
print("fork equal:", f(f"_{name}") == f(f"_{name}ref"))
