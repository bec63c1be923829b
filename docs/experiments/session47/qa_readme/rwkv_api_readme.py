from rwkv_api import Client

with Client("http://localhost:8101") as client:
    task = client.create("User: Name three rivers.\n\nAssistant:", max_tokens=50, persistent=True)
    task.wait()  # polls get_result until the task has finished
    print(task.task_id, task.result)
    for text in client.create("User: Tell a story.\n\nAssistant:", max_tokens=50, stream=True):
        print(text, end="", flush=True)
print()
# AsyncClient claims
import asyncio
from rwkv_api import AsyncClient
async def main():
    async with AsyncClient("http://localhost:8101") as c:
        try:
            r = await c.create("User: hi\n\nAssistant:", max_tokens=10, stream=True)
            print("create stream=True returned", type(r))
            try:
                async for t in r: print(repr(t))
            except Exception as e: print("iter EXC", type(e).__name__, e)
        except Exception as e:
            print("create(stream=True) EXC", type(e).__name__, str(e)[:200])
        out = []
        async for t in c.create_stream("User: hi\n\nAssistant:", max_tokens=10):
            out.append(t)
        print("create_stream ok:", len(out), "chunks")
        out = []
        async for t in c.fim_stream("def f(", "\n    return x", max_tokens=10):
            out.append(t)
        print("fim_stream ok:", len(out), "chunks")
asyncio.run(main())
