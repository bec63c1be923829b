# In-process, no patches: the writer kept busy by another connection's write lock.
import sys, threading, time, tempfile, os, sqlite3, faulthandler
sys.path.insert(0, "/tmp/rev_task/test"); sys.path.insert(0, "/tmp/rev_task")
from task_fakes import make_task
from server.task.manager import TaskManager
db = os.path.join(tempfile.mkdtemp(), "t.db")
tm = TaskManager(db_path=db, capacity=3, queue_size=4, max_db_size=1000)
tm.put_task("TASK_y", make_task(1)); tm.flush()   # stored, and in memory (as the delete route leaves it: it gets the task first)
ext = sqlite3.connect(db, isolation_level=None, timeout=1); ext.execute("BEGIN IMMEDIATE")
tm.put_task("TASK_x", make_task(2, "TASK_x")); tm.close_task("TASK_x")   # a write now retries
time.sleep(0.3)
d = threading.Thread(target=lambda: tm.delete_task_from_any_level("TASK_y")); d.start()
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0.3)
got = []
rs = [threading.Thread(target=lambda: got.append(tm.get_task("TASK_y"))) for _ in range(3)]
[r.start() for r in rs]
time.sleep(0.2); faulthandler.dump_traceback(all_threads=True) if "-v" in sys.argv else None
time.sleep(2.0); ext.execute("ROLLBACK"); ext.close()
d.join(); [r.join() for r in rs]
print("lookups during the delete:", got, "| after:", tm.get_task("TASK_y"))
tm.close()
