import httpx, sqlite3, threading, time, os, signal
B = "http://localhost:8791/v1/tasks"; DB = "/tmp/rev_task/db.sqlite"
c = httpx.Client(timeout=120)
y = c.post(B + "/create", json={"prompt": "Hello", "max_tokens": 5}).json()["task_id"]; time.sleep(1.5)
ext = sqlite3.connect(DB, isolation_level=None, timeout=1); ext.execute("BEGIN IMMEDIATE")
x = c.post(B + "/create", json={"prompt": "Other", "max_tokens": 3}).json()["task_id"]; time.sleep(1.0)
threading.Thread(target=lambda: print("delete", c.post(f"{B}/{y}/delete").status_code)).start()
time.sleep(0.05)
def look():
    with httpx.Client(timeout=120) as cc: print("look", cc.get(f"{B}/{y}/status").status_code)
for _ in range(3): threading.Thread(target=look).start()
time.sleep(0.4); os.kill(int(open("/tmp/rev_task/review/server.pid").read()), signal.SIGUSR1)
time.sleep(2); ext.execute("ROLLBACK"); ext.close(); time.sleep(1)
