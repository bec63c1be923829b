"""Whether SQLite can repair a task database whose index root page was overwritten (session 41):
REINDEX, REINDEX of the index, DROP INDEX (+ CREATE), and VACUUM INTO a new file, each on a copy.

    PYTHONPATH=. uv run python docs/experiments/session41/cpu/repair_damaged_index.py
"""
import shutil
import sqlite3
import tempfile
from pathlib import Path

from server.task.store import TaskStore

d = Path(tempfile.mkdtemp())
p = str(d / "t.db")
s = TaskStore(p)
for i in range(200):
    s.put(f"TASK_{i:04d}", '{"a":1}', bytes(3000), is_template=(i % 10 == 0))
s.close()
with sqlite3.connect(p) as db:
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name='tasks_age'").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
with open(p, "r+b") as f:  # the index's root page overwritten
    f.seek((root - 1) * size)
    f.write(b"\xa5" * size)
for how in ("REINDEX", "REINDEX tasks_age", "DROP INDEX tasks_age", "VACUUM INTO"):
    shutil.copy(p, p + ".c")
    db = sqlite3.connect(p + ".c")
    try:
        if how == "VACUUM INTO":
            db.execute(f"VACUUM INTO '{d / 'fixed.db'}'")
        else:
            db.execute(how)
            if how.startswith("DROP"):
                db.execute("CREATE INDEX tasks_age ON tasks (is_template, updated_at)")
        print(how, "ok", db.execute("PRAGMA quick_check").fetchall()[:3])
    except sqlite3.DatabaseError as e:
        print(how, "failed:", e, "(code", getattr(e, "sqlite_errorcode", None), ")")
    db.close()
