"""R5: close_task('_T') while the template's put_task is writing its row (no delete anywhere).
close_task pops _templates['_T']; the put's tail takes that for a delete and calls
writer.delete('_T'): the template put returns success and is gone from memory and database."""
from common import *
db = fresh_db(); tm = manager(db)
written, go = threading.Event(), threading.Event()
real_wt = tm.writer.write_template
def wt(tid, snap):
    real_wt(tid, snap)                      # the row is written (durably)
    if threading.current_thread().name == "putA":
        written.set(); assert go.wait(10)
tm.writer.write_template = wt
res = []
ta = threading.Thread(target=lambda: res.append(tm.put_task("_T", make_task(1, task_id="_T"))),
                      name="putA")
ta.start(); assert written.wait(10)
print("row written:", tm.store.contains("_T"))
print("close_task returns:", tm.close_task("_T"))
go.set(); ta.join(10); tm.writer.flush()
print("put_task returned:", res)
print("live get_task:", hist(tm.get_task("_T")), "row:", tm.store.contains("_T"))
tm.close()
print("after restart:", restart_view(db, "_T"), " expected", make_task(1).history)
