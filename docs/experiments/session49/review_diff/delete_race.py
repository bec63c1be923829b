"""A lookup that starts after a delete's lock section, reads the row while the delete waits for
the database, and reaches its final lock section only after the delete finished: _deleting is
empty again and _deleted_since(start) is False (start == the delete's own number) -> the deleted
task is cached again and survives a restart."""
import sys, threading, tempfile, os
sys.path.insert(0, "test")
from task_fakes import make_task
from server.task.manager import TaskManager

db = os.path.join(tempfile.mkdtemp(), "t.db")
def manager():
    return TaskManager(db_path=db, capacity=3, queue_size=4, max_db_size=1000)

tm = manager()
tm.put_task("TASK_y", make_task(1)); tm.close_task("TASK_y"); tm.flush()

# 1. hold the delete where it waits for the database (as behind the writer's current write)
reached, go = threading.Event(), threading.Event()
real_delete = tm.writer.delete
def held_delete(tid):
    reached.set(); go.wait(5); return real_delete(tid)
tm.writer.delete = held_delete
deleter = threading.Thread(target=tm.delete_task_from_any_level, args=("TASK_y",)); deleter.start()
assert reached.wait(5)

# 2. the lookup reads the row (still there), then is pre-empted until the delete has finished
row_read, delete_done = threading.Event(), threading.Event()
real_get = tm.store.get
def slow_get(tid):
    r = real_get(tid); row_read.set(); delete_done.wait(5); return r
tm.store.get = slow_get
got = []
reader = threading.Thread(target=lambda: got.append(tm.get_task("TASK_y"))); reader.start()
assert row_read.wait(5)
go.set(); deleter.join(5); tm.writer.delete = real_delete
print("deleting after delete:", tm._deleting)
delete_done.set(); reader.join(5); tm.store.get = real_get
print("lookup during delete got:", got[0] and got[0].task_id)
print("in cpu list after delete:", "TASK_y" in tm.list_all_tasks()["cpu_tasks"])
print("get_task after delete:", tm.get_task("TASK_y") is not None)
# its next change is written back
t = tm.get_task("TASK_y")
if t is not None:
    t.max_tokens = 7  # any change of its signature
    tm.close_task("TASK_y")
tm.close()
print("after restart:", manager().get_task("TASK_y") is not None)
