# spec lines 282-316 (template with start_daemon + run), model.pth -> tiny.pth
from server import RWKV070ModelLoader, DynamicScheduler
from server.task.manager import get_task_manager

pipeline = RWKV070ModelLoader("tiny.pth")
scheduler = DynamicScheduler(pipeline)
scheduler.start_daemon()
task_manager = get_task_manager()

template_task = scheduler.new_task(
    prompt="User: 你是一个专业的中英技术翻译，请翻译以下内容。\n\n",
    max_tokens=0,
    temperature=0.3,
)
scheduler.run()
task_manager.put_task("_tech_translator", template_task)

new_id = task_manager.fork_template("_tech_translator")
task = task_manager.get_task(new_id)
task.continue_gen(
    "请翻译：The transformer architecture revolutionized NLP.",
    max_tokens=500,
)
scheduler.add_task(task)
import time; t0=time.time()
while task.status.name != "FINISHED" and time.time()-t0 < 60: time.sleep(0.2)
print("status", task.status, "tokens", len(task.get_all_tokens()))

roles = {
    "_coder":       "User: 你是一个资深的 Python 后端工程师。\n\nAssistant: 好的。\n\n",
    "_translator":  "User: 你是一个专业的中英技术翻译。\n\nAssistant: 明白。\n\n",
    "_writer":      "User: 你是一个创意故事作家。\n\nAssistant: 好的，让我们开始。\n\n",
}
for role_id, prompt in roles.items():
    task = scheduler.new_task(prompt=prompt, max_tokens=0)
    scheduler.run()
    task_manager.put_task(role_id, task)
coding_task_id = task_manager.fork_template("_coder")
print("forked", coding_task_id)
scheduler.shutdown()
