"""R3: a force delete completes while template put A is between its reservation and its row
insert; A's row lands after the delete; a lookup then reads it (no delete since it began) and
caches it in _templates; A's tail then deletes the row. The deleted template stays served by the
live manager (and blocks a new put of the id) until a restart, where it is gone."""
from common import *
from server.task.policy import TemplateExists
db = fresh_db(); tm = manager(db)
before, go1, after, go2 = (threading.Event() for _ in range(4))
real_wt = tm.writer.write_template
def wt(tid, snap):
    if threading.current_thread().name == "putA":
        before.set(); assert go1.wait(10)
    real_wt(tid, snap)
    if threading.current_thread().name == "putA":
        after.set(); assert go2.wait(10)
tm.writer.write_template = wt
ta = threading.Thread(target=tm.put_task, args=("_T", make_task(1, task_id="_T")), name="putA")
ta.start(); assert before.wait(10)
print("delete returns:", hist(tm.delete_task_from_any_level("_T", force=True)))
print("lookup right after the delete:", hist(tm.get_task("_T")))
go1.set(); assert after.wait(10)
print("lookup after A's row landed:", hist(tm.get_task("_T")))
go2.set(); ta.join(10); tm.writer.flush()
print("after A's put returned: live:", hist(tm.get_task("_T")), "row:", tm.store.contains("_T"),
      "listed:", "_T" in tm.list_all_tasks()["cpu_tasks"])
try:
    tm.put_task("_T", make_task(2, task_id="_T")); print("new put ok")
except TemplateExists as e:
    print("new put refused:", e)
tm.close()
print("after restart:", restart_view(db, "_T"))
