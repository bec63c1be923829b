import sys, os, tempfile, threading
ROOT = os.environ.get("QA_ROOT", "/tmp/qa_store")
sys.path.insert(0, ROOT); sys.path.insert(0, ROOT + "/test")
os.environ.setdefault("OMP_NUM_THREADS", "1")
from task_fakes import make_task, same_task  # noqa
from server.task.manager import TaskManager  # noqa
from server.task.task import Status  # noqa

def manager(db, capacity=4):
    return TaskManager(db_path=db, capacity=capacity, queue_size=8, max_db_size=1000)

def fresh_db():
    return os.path.join(tempfile.mkdtemp(prefix="qa_store_"), "tasks.db")

def restart_view(db, tid):
    tm = manager(db)
    try:
        t = tm.get_task(tid)
        return None if t is None else list(t.history)
    finally:
        tm.close()

def hist(t):
    return None if t is None else list(t.history)

def held_delete(tm, task_id, force=True):
    """delete_held_at_the_row with force: held after forget, before writer.delete."""
    reached, go = threading.Event(), threading.Event()
    real = tm.writer.delete
    def held(*a, **k):
        if threading.current_thread() is deleter:
            reached.set(); assert go.wait(10)
        return real(*a, **k)
    tm.writer.delete = held
    deleter = threading.Thread(target=tm.delete_task_from_any_level, args=(task_id, force))
    deleter.start(); assert reached.wait(10)
    def release():
        go.set(); deleter.join(10); assert not deleter.is_alive(); tm.writer.delete = real
    return release
