import os
from rwkv_api import Client
client = Client(os.environ.get("URL", "http://localhost:8101"))
task = client.create("Hello world", max_tokens=50)
result = task.wait()
print(type(result).__name__, result.result[:80])
for chunk in client.create_stream("Tell me a story", max_tokens=200):
    print(chunk, end="", flush=True)
print()
