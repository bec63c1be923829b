from server import RWKV070ModelLoader, DynamicScheduler
from server.task.manager import get_task_manager
from server.config import settings

loader = RWKV070ModelLoader(settings.model_path, settings.vocab_path)
scheduler = DynamicScheduler(loader, 256, 32)
task_manager = get_task_manager()
task_manager.set_dependencies(loader, scheduler.sampler)

tpl = scheduler.new_task(
    "User: 你是一个资深 Python 后端工程师，请遵循 PEP8 规范。\n\nAssistant: 好的。\n\n",
    max_tokens=0, temperature=0.3,
)
scheduler.run()
task_manager.put_task("_coder", tpl)
tasks = []
for question in ["写一个线程安全的单例", "如何优化数据库连接池？", "解释 GIL 及其影响"]:
    new_id = task_manager.fork_template("_coder")
    task = task_manager.get_task(new_id)
    task.continue_gen()
    task.prefill(f"User: {question}\n\nAssistant:")
    task.max_tokens = 500
    scheduler.add_task(task)
    tasks.append(task)
scheduler.run()
for t in tasks: print(t.task_id, t.status, len(t.round_tokens()))
print("close_task", task_manager.close_task(tasks[0].task_id))
print("delete", task_manager.delete_task_from_any_level(tasks[1].task_id))
print("delete tpl no force:"); 
try: print(task_manager.delete_task_from_any_level("_coder"))
except Exception as e: print("EXC", type(e).__name__, e)
print("delete tpl force", task_manager.delete_task_from_any_level("_coder", force=True))
