from server import RWKV070ModelLoader, DynamicScheduler
from server.config import settings
loader = RWKV070ModelLoader(settings.model_path, settings.vocab_path)
scheduler = DynamicScheduler(loader, max_batch_size=256, buffer_size=32)
def on_tokens(tokens):
    text = loader.decode(tokens)
    print(text, end="", flush=True)
def on_finish(all_tokens):
    print(f"\n--- 完成，共 {len(all_tokens)} tokens ---")
task = scheduler.new_task(
    "User: 写一首关于春天的诗\n\nAssistant:",
    max_tokens=300, temperature=0.8,
    collect_callback=on_tokens, finish_callback=on_finish,
)
scheduler.run()
