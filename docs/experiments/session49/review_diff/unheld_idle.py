"""TaskService.unheld over real _fork copies of idle tasks: never run, loaded from the database,
a template (read back after a restart), a FINISHED task: none may be a 409."""
import sys, os, tempfile, asyncio
sys.path.insert(0, "test")
from types import SimpleNamespace
from fastapi import HTTPException
from task_fakes import make_task
from server.api.task_service import TaskService, _fork
from server.task.manager import TaskManager
from server.task.task import Task, Status

async def store(fn, *a):
    import anyio
    return await anyio.to_thread.run_sync(fn, *a)
svc = SimpleNamespace(store=store)
db = os.path.join(tempfile.mkdtemp(), "t.db")
tm = TaskManager(db_path=db, capacity=3, queue_size=4, max_db_size=100)
tm.put_task("TASK_a", make_task(1)); tm.put_task("_tpl", make_task(2)); tm.close(); 
tm = TaskManager(db_path=db, capacity=3, queue_size=4, max_db_size=100)
never = Task(task_id="TASK_new", max_tokens=4); never.prefill([1, 2, 3])
cases = {"never run (PREFILL, no state)": never, "loaded from db": tm.get_task("TASK_a"),
         "template from db": tm.get_task("_tpl"), "fresh Task()": Task(task_id="TASK_e")}
for name, t in cases.items():
    for i in range(3):
        try:
            out = asyncio.run(TaskService.unheld(svc, _fork, t, f"TASK_c{i}"))
            r = f"ok ({out.task_id})"
        except HTTPException as e:
            r = f"{e.status_code} {e.detail}"
    print(f"{name:32s} status={t.status.name:8s}: {r}")
