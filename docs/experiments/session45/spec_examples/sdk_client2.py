from rwkv_api import Client

client = Client("http://localhost:8792")

# 先创建任务（非流式）
task = client.create("Hello", max_tokens=200)

# 订阅实时流式输出，重连时传 pos 避免重复
n=0
for chunk in task.stream():
    n+=len(chunk)
    print(chunk, end="", flush=True)
print("\nchars", n, task.task_id)
