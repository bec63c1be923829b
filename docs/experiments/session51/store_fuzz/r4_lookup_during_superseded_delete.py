"""R4: an old delete of TASK_same is held between forget and the row delete; a new task is put
under the id and closed (written: its row lands and supersedes the delete's mark). A lookup that
starts after the put+close returned reads the new row but returns None because the id is still
in _deleting (get_task treats every row read during a delete as stale)."""
from common import *
db = fresh_db(); tm = manager(db)
ID = "TASK_same"
tm.put_task(ID, make_task(1, task_id=ID)); tm.close_task(ID); tm.writer.flush()
release = held_delete(tm, ID)
tm.put_task(ID, make_task(2, task_id=ID)); assert tm.close_task(ID); tm.writer.flush()
print("new row landed:", restart_view.__name__ and tm.store.get(ID) is not None)
print("lookup after put+close returned (delete still under way):", hist(tm.get_task(ID)))
print("fork of it:", end=" ")
try:
    print(tm.fork_template(ID, "TASK_child"))
except Exception as e:
    print(type(e).__name__, e)
release(); tm.writer.flush()
print("lookup after the delete ended:", hist(tm.get_task(ID)))
tm.close()
print("after restart:", restart_view(db, ID))
