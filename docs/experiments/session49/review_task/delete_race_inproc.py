# In-process: a get_task that reads the row while a delete waits for the database (the writer
# holds _db_lock) caches the deleted task again; it is then served, and written back.
import sys, threading, time, tempfile, os
sys.path.insert(0, "/tmp/rev_task/test"); sys.path.insert(0, "/tmp/rev_task")
from task_fakes import make_task
from server.task.manager import TaskManager
db = os.path.join(tempfile.mkdtemp(), "t.db")
tm = TaskManager(db_path=db, capacity=3, queue_size=4, max_db_size=1000)
tm.put_task("TASK_y", make_task(1)); tm.flush(); tm.close_task("TASK_y"); tm.flush()
print("stored:", tm.store.contains("TASK_y"), "in memory:", "TASK_y" in tm._cache)
# the writer busy with another task's write: hold its _db_lock (as _store does while it writes)
tm.writer._db_lock.acquire()
d = threading.Thread(target=lambda: tm.delete_task_from_any_level("TASK_y")); d.start()
time.sleep(0.2)                     # the delete has dropped TASK_y and waits for the database
got = []
r = threading.Thread(target=lambda: got.append(tm.get_task("TASK_y"))); r.start()
r.join(2)                           # (the read needs only the store's own lock: free)
tm.writer._db_lock.release(); d.join()
print("lookup during the delete:", got)
print("row after delete:", tm.store.contains("TASK_y"))
print("get_task after delete:", tm.get_task("TASK_y"))
t = tm.get_task("TASK_y"); t.continue_gen(max_tokens=9)  # (an application continues it; the
t.status = t.status.FINISHED; tm._on_finished(t); tm.flush()  #  scheduler's finish, by hand)
print("row after its next finish:", tm.store.contains("TASK_y"))
tm.close()
