# README "openai SDK" snippet, literal except port 8101
from openai import OpenAI

client = OpenAI(base_url="http://localhost:8101/v1", api_key="sk-local")
r = client.chat.completions.create(model="rwkv-7", max_tokens=200,
                                   messages=[{"role": "user", "content": "Hello!"}])
print(r.choices[0].message.content)  # the answer; the model's thinking: .reasoning_content
print("reasoning_content len:", len(getattr(r.choices[0].message, "reasoning_content", "") or ""))

for chunk in client.chat.completions.create(model="rwkv-7", stream=True, max_tokens=200,
                                            reasoning_effort="none",
                                            messages=[{"role": "user", "content": "Tell a joke"}]):
    if chunk.choices and chunk.choices[0].delta.content:
        print(chunk.choices[0].delta.content, end="", flush=True)
print()
from pydantic import BaseModel

class City(BaseModel):
    name: str
    population: int

try:
    r = client.chat.completions.parse(model="rwkv-7", max_tokens=100, response_format=City,
                                  messages=[{"role": "user", "content": "A big city, as JSON"}])
    print(r.choices[0].message.parsed)  # City(name=..., population=...)
except Exception as e:
    print("EXC", type(e).__name__, str(e)[:300])
