"""R2: template put A has written its row (write_template returned) but not yet checked whether
it was deleted meanwhile; a force delete of the id completes, then template put B completes.
A's tail sees _templates['_T'] is not A and calls writer.delete('_T') with no mark: B's row goes."""
from common import *
db = fresh_db(); tm = manager(db)
written, go = threading.Event(), threading.Event()
real_wt = tm.writer.write_template
def wt(tid, snap):
    real_wt(tid, snap)
    if threading.current_thread().name == "putA":
        written.set(); assert go.wait(10)
tm.writer.write_template = wt
ta = threading.Thread(target=tm.put_task, args=("_T", make_task(1, task_id="_T")), name="putA")
ta.start(); assert written.wait(10)
print("A's row written:", tm.store.contains("_T"))
print("delete returns:", hist(tm.delete_task_from_any_level("_T", force=True)))
tm.put_task("_T", make_task(2, task_id="_T"))
print("B put returned; row:", tm.store.contains("_T"), "live:", hist(tm.get_task("_T")))
go.set(); ta.join(10)
tm.writer.flush()
print("after A's put returned: live:", hist(tm.get_task("_T")), "row:", tm.store.contains("_T"))
tm.close()
print("after restart:", restart_view(db, "_T"), " expected", make_task(2).history)
