from server.task.manager import get_task_manager
from server import RWKV070ModelLoader, DynamicScheduler
loader = RWKV070ModelLoader("model.pth")
scheduler = DynamicScheduler(loader)
tm = get_task_manager()
for tid in ["_tech_translator", "_coder", "_writer"]:
    t = tm.get_task(tid); print(tid, t is not None)
nid = tm.fork_template("_writer"); t = tm.get_task(nid); t.continue_gen("User: hi\n\nAssistant:", max_tokens=5); scheduler.add_task(t); scheduler.run(); print(repr(t.decode(t.pop_tokens())))
