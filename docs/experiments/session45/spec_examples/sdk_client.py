from rwkv_api import Client

client = Client("http://localhost:8792")

# 创建任务并等待结果 —— 服务端自动批量调度
task = client.create("Hello world", max_tokens=50)
result = task.wait()
print("result type:", type(result))
print(repr(result.result)[:120])

# 实时流式输出
for chunk in client.create_stream("Tell me a story", max_tokens=200):
    print(chunk, end="", flush=True)
print("\n-----")
