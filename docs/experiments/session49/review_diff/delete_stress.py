"""Concurrent put/close/get/delete of a few ids while the writer writes, store.delete raising
now and then (sqlite3.OperationalError): no deadlock (every thread ends), _deleting back to {}."""
import sys, os, tempfile, threading, random, sqlite3, time
sys.path.insert(0, "test")
from task_fakes import make_task
from server.task.manager import TaskManager, TaskNotFound
db = os.path.join(tempfile.mkdtemp(), "t.db")
tm = TaskManager(db_path=db, capacity=2, queue_size=2, max_db_size=50)
real = tm.store.delete
def flaky_delete(tid):
    if random.random() < 0.2:
        raise sqlite3.OperationalError("disk I/O error (injected)")
    time.sleep(random.random() * 0.002)
    return real(tid)
tm.store.delete = flaky_delete
ids = [f"TASK_{i}" for i in range(4)]
errors, stop = [], time.monotonic() + 8
def worker(seed):
    rng = random.Random(seed)
    while time.monotonic() < stop:
        tid = rng.choice(ids); op = rng.random()
        try:
            if op < 0.3:
                tm.put_task(tid, make_task(rng.randrange(3)))
            elif op < 0.45:
                tm.close_task(tid)
            elif op < 0.75:
                tm.get_task(tid)
            else:
                tm.delete_task_from_any_level(tid)
        except TaskNotFound:
            pass
        except sqlite3.OperationalError as e:
            if "injected" not in str(e): errors.append(repr(e))
        except Exception as e:
            errors.append(repr(e))
ts = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
for t in ts: t.start()
for t in ts: t.join(30)
print("threads alive (deadlock):", sum(t.is_alive() for t in ts))
print("_deleting:", tm._deleting, "errors:", errors[:3])
tm.flush(); tm.close()
