import time
from server import RWKV070ModelLoader, DynamicScheduler
from server.config import settings
loader = RWKV070ModelLoader(settings.model_path, settings.vocab_path)
scheduler = DynamicScheduler(loader, 256, 32)
scheduler.start_daemon()
task = scheduler.new_task("User: 你好\n\nAssistant:", max_tokens=100)
t0 = time.time()
while task.status.name != "FINISHED" and time.time() - t0 < 30: time.sleep(0.1)
print("after", round(time.time()-t0,2), "s: status", task.status, "tokens", len(task.get_all_tokens()))
scheduler.shutdown()
print("shutdown ok")
