from server import RWKV070ModelLoader, DynamicScheduler
from server.config import settings

# 1. 加载模型
loader = RWKV070ModelLoader(settings.model_path, settings.vocab_path)

# 2. 创建调度器
scheduler = DynamicScheduler(
    loader,
    max_batch_size=256,   # 最大并发
    buffer_size=32,       # 每个 pulse 生成的 token 数
)

# 3. 提交任务
tasks = [
    scheduler.new_task(
        f"User: {prompt}\n\nAssistant:",
        max_tokens=200,
        temperature=0.7,
        top_p=0.3,
        top_k=50,
    )
    for prompt in ["你好，介绍一下你自己", "用 Python 写一个快速排序", "1+1等于几？"]
]

# 4. 运行（阻塞，直到所有任务完成）
scheduler.run()

# 5. 获取结果
for task in tasks:
    print(f"[{task.task_id}] {task.decode(task.pop_tokens())[:200]}...")

# --- extra checks of the documented API ---
print("status", [t.status for t in tasks], [t.status.name for t in tasks])
print(type(loader.encode("你好")), loader.encode("你好"))
print(repr(loader.decode([123, 456])))
st = loader.gen_state(batch_size=1); print("gen_state", type(st))
t = tasks[0]
print("current_token", t.current_token, "get_all_tokens", len(t.get_all_tokens()))
from server import SimpleScheduler
print("SimpleScheduler", SimpleScheduler)
t2 = scheduler.new_task([1, 2, 3])  # prompt as token list, defaults
print("new task defaults", t2.task_id, t2.max_tokens, getattr(t2,'temperature',None), getattr(t2,'top_p',None), getattr(t2,'top_k',None), getattr(t2, 'seed', None), t2.status)
scheduler.run(); print("default max_tokens ->", len(t2.pop_tokens()))
