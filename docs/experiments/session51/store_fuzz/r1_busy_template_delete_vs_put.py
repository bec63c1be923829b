"""R1: a force delete of a template with no row yet (put while busy) is held between forget and
the row delete; a new template put under the id meanwhile is written by write_template (caller
thread), which never sets DeleteMark.superseded, so the held delete removes the NEW row."""
from common import *
db = fresh_db(); tm = manager(db)
a = make_task(1, task_id="_T", status=Status.READY)
a._stop_hook = lambda t: None            # busy, as scheduler.add_task does: no row yet
tm.put_task("_T", a)
print("row after busy put:", tm.store.contains("_T"))
release = held_delete(tm, "_T")   # forget done, row delete held
tm.put_task("_T", make_task(2, task_id="_T"))  # completes: template B stored durably
print("B put returned; row now:", tm.store.contains("_T"), "history", hist(tm.get_task("_T")))
release()
tm.writer.flush()
print("live get_task after delete ended:", hist(tm.get_task("_T")))
print("row:", tm.store.contains("_T"))
tm.close()
print("after restart:", restart_view(db, "_T"), " expected", make_task(2).history)
