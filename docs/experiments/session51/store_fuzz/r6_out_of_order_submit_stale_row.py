"""R6 (found by fuzz.py seed 1270, run A): two writes of one id prepared in order (seq 1, 2)
under the manager's lock but submitted outside it in the other order (the first submitter is
held up: a full queue, or preempted). The writer lands the newer one, then the older one over it:
_store checks only that the ticket is current, not the order. No delete involved."""
from common import *
db = fresh_db(); tm = TaskManager(db_path=db, capacity=1, queue_size=8, max_db_size=1000)
ID = "TASK_b"
tm.put_task(ID, make_task(1, task_id=ID, status=Status.READY))  # (not written at its put)
held, go = threading.Event(), threading.Event()
real_submit = tm.writer.submit
def submit(job):
    if threading.current_thread().name == "X" and job.task_id == ID:
        held.set(); assert go.wait(10)      # as when queue.put blocks on a full queue
    real_submit(job)
tm.writer.submit = submit
x = threading.Thread(target=tm.put_task, args=("TASK_o", make_task(9, task_id="TASK_o")), name="X")
x.start(); assert held.wait(10)            # X's put evicted TASK_b #1: its write prepared, not queued
tm.put_task(ID, make_task(2, task_id=ID))  # a new task under the id
assert tm.close_task(ID)                   # written and dropped: prepared after, queued first
tm.writer.flush()
import json
row = lambda: json.loads(tm.store.get(ID)[0])["history"]
print("after put #2 + close_task + flush: row history", row())
go.set(); x.join(10); tm.writer.flush()
print("after the held submit landed: row history", row())
print("live get_task:", hist(tm.get_task(ID)))
tm.close()
print("after restart:", restart_view(db, ID), " expected", make_task(2).history)
