"""add_task's and admission's messages for a bad sampling parameter: the task id twice."""
import sys; sys.path.insert(0, "test")
from server.model.random import main as make_random
import tempfile, os
p = os.path.join(tempfile.mkdtemp(), "tiny.pth"); make_random([p, "--preset", "tiny", "--seed", "1"])
from server.model.loader import RWKV070ModelLoader
from server.scheduler import DynamicScheduler
from server.task.task import Task
loader = RWKV070ModelLoader(p, device="cpu")
s = DynamicScheduler(loader, max_batch_size=2, buffer_size=2)
t = Task(task_id="TASK_a", max_tokens=4); t.prefill([300, 301]); t.temperature = float("nan")
try:
    s.add_task(t)
except ValueError as e:
    print("add_task:", e)
t2 = s.new_task([300, 301], max_tokens=4, temperature=0.0)
t2.temperature = float("nan")
s.run()
print("admission:", t2.finish_reason, t2.error)
