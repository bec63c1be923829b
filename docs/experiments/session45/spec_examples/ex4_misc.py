import time
from server import RWKV070ModelLoader, DynamicScheduler
from server.config import settings

loader = RWKV070ModelLoader(settings.model_path, settings.vocab_path)
scheduler = DynamicScheduler(loader, max_batch_size=64, buffer_size=32)

# FIM
prefix = "def hello_world():\n    print("; suffix = ")\n    return True"
prompt = f"✿prefix✿✿suffix✿{suffix}✿middle✿{prefix}"
task = scheduler.new_task(prompt, max_tokens=100, temperature=0.8)
scheduler.run()
print("FIM:", repr(loader.decode(task.pop_tokens())[:80]))

def translate(texts: list[str], source_lang="中文", target_lang="英文"):
    tasks = [
        scheduler.new_task(
            f"User: 将以下{source_lang}翻译为{target_lang}：{t}\n\nAssistant:",
            max_tokens=300,
            temperature=0.3,
            top_p=0.3,
        )
        for t in texts
    ]
    scheduler.run()
    return [loader.decode(t.pop_tokens()) for t in tasks]

results = translate(["你好世界", "机器学习很有趣", "今天天气真好"])
for r in results:
    print(repr(r[:60]))

# daemon
scheduler.start_daemon()
task = scheduler.new_task("User: 你好\n\nAssistant:", max_tokens=100)
t0=time.time()
while task.status.name != "FINISHED" and time.time()-t0 < 30: time.sleep(0.1)
print("daemon picked up new_task:", task.status.name, len(task.get_all_tokens()), f"{time.time()-t0:.2f}s")
# stop() mid-generation
task = scheduler.new_task("User: long\n\nAssistant:", max_tokens=5000)
time.sleep(1.0); task.stop()
t0=time.time()
while task.status.name != "FINISHED" and time.time()-t0 < 10: time.sleep(0.05)
print("after stop:", task.status.name, len(task.get_all_tokens()))
scheduler.shutdown()
print("shutdown ok")
