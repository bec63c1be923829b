# A delete that races a lookup of the same id comes back: the lookup reads the row before the
# delete's DELETE lands (the writer holds the database), and caches it as "not deleted".
# The writer is kept busy the documented way: another connection (a backup, a sqlite3 shell)
# holds SQLite's write lock for a few seconds.
import httpx, sqlite3, threading, time, subprocess, json
B = "http://localhost:8791/v1/tasks"
DB = "/tmp/rev_task/db.sqlite"
c = httpx.Client(timeout=120)
def res(t): return c.get(f"{B}/{t}/get_result").json()
y = c.post(B + "/create", json={"prompt": "Hello", "max_tokens": 5}).json()["task_id"]
time.sleep(1.5)   # finished and written
print("Y stored:", y, res(y)["finished"])
ext = sqlite3.connect(DB, isolation_level=None, timeout=1)
ext.execute("BEGIN IMMEDIATE")        # an outside connection holds the write lock
x = c.post(B + "/create", json={"prompt": "Other", "max_tokens": 3}).json()["task_id"]
time.sleep(1.4)   # X finished (~0.1 s): the writer retries its write (1 s tries, 50 ms apart), holding the database meanwhile; the delete comes mid-try
out = {}
def do_delete():
    t0=time.time(); out["delete"] = (c.post(f"{B}/{y}/delete").status_code, round(time.time()-t0,2))
d = threading.Thread(target=do_delete); d.start()
time.sleep(0.05)   # the delete has dropped Y from memory and waits for the database
codes = []
def look():
    t0=time.time()
    with httpx.Client(timeout=120) as cc: codes.append((cc.get(f"{B}/{y}/status").status_code, round(time.time()-t0,2)))
ts = [threading.Thread(target=look) for _ in range(3)]
[t.start() for t in ts]
time.sleep(2.5)
ext.execute("ROLLBACK"); ext.close()  # the outside connection lets go
d.join(); [t.join() for t in ts]
print("delete ->", out["delete"], "; lookups during the delete ->", codes)
time.sleep(0.5)
r = c.get(f"{B}/{y}/status"); print("status after the delete answered:", r.status_code, r.text)
lst = c.get(B + "/list").json(); print("listed in cpu_tasks:", y in lst["cpu_tasks"], "db_tasks:", y in lst["db_tasks"])
# continue it: its next finish writes the row again, and a restart serves it
r = c.post(f"{B}/{y}/continue", json={"prompt": " again", "max_tokens": 3}); print("continue:", r.status_code)
time.sleep(1.5)
subprocess.run(["/tmp/rev_task/review/srv.sh", "stop"]); subprocess.run(["/tmp/rev_task/review/srv.sh", "start"])
c = httpx.Client(timeout=60)
r = c.get(f"{B}/{y}/status"); print("after restart:", r.status_code, r.text)
