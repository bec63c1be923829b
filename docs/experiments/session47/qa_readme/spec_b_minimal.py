from server import RWKV070ModelLoader, DynamicScheduler
from server.config import settings
loader = RWKV070ModelLoader(settings.model_path, settings.vocab_path)
scheduler = DynamicScheduler(loader, max_batch_size=256, buffer_size=32)
tasks = [
    scheduler.new_task(f"User: {prompt}\n\nAssistant:", max_tokens=200, temperature=0.7, top_p=0.3, top_k=50)
    for prompt in ["你好，介绍一下你自己", "用 Python 写一个快速排序", "1+1等于几？"]
]
scheduler.run()
for task in tasks:
    print(f"[{task.task_id}] {task.decode(task.pop_tokens())[:200]}...")
# loader methods
loader2 = RWKV070ModelLoader(settings.model_path, "eof_v20230424.txt")
print(loader.encode("你好"), repr(loader.decode(loader.encode("你好"))))
print(loader.decode([123, 456]))
s = loader.gen_state(batch_size=1); print(type(s).__name__, getattr(s, "batch_size", None))
# Task attributes from the table
t = scheduler.new_task("User: hi\n\nAssistant:", max_tokens=5)
print("task_id", t.task_id, "status", t.status, "current_token", t.current_token)
scheduler.run()
print("after run status", t.status, "current_token", t.current_token)
t.stop(); print("stop() ok", t.status)
from server import SimpleScheduler; print("SimpleScheduler", SimpleScheduler)
