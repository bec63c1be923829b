from server import RWKV070ModelLoader, DynamicScheduler
from server.config import settings
loader = RWKV070ModelLoader(settings.model_path, settings.vocab_path)
scheduler = DynamicScheduler(loader, max_batch_size=64, buffer_size=32)
def translate(texts, source_lang="中文", target_lang="英文"):
    tasks = [scheduler.new_task(f"User: 将以下{source_lang}翻译为{target_lang}：{t}\n\nAssistant:",
             max_tokens=300, temperature=0.3, top_p=0.3) for t in texts]
    scheduler.run()
    return [loader.decode(t.pop_tokens()) for t in tasks]
results = translate(["你好世界", "机器学习很有趣", "今天天气真好"])
for r in results: print(r[:80])
