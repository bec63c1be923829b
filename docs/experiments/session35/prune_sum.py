"""What the task store's byte sum costs (``TaskStore.prune`` with ``max_bytes``): the query it
runs, over 10,000 non-template rows of 20 KB blobs in a scratch SQLite file with the store's
table and index. The 2-core machine, from the repository's root:
    PYTHONPATH=. OMP_NUM_THREADS=1 uv run python \
        docs/experiments/session35/prune_sum.py [ROWS] [BLOB]
Prints ms a sum (three runs)."""

import os
import sqlite3
import sys
import tempfile
import time

from server.task.store import _INDEX, _TABLE

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
BLOB = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
with tempfile.TemporaryDirectory() as tmp:
    db = sqlite3.connect(os.path.join(tmp, "t.db"))
    db.execute(_TABLE)
    db.execute(_INDEX)
    db.executemany("INSERT INTO tasks (task_id, is_template, updated_at, meta, blob) "
                   "VALUES (?, 0, ?, ?, ?)",
                   [(f"TASK_{i}", float(i), "{}" * 100, os.urandom(BLOB)) for i in range(ROWS)])
    db.commit()
    for _ in range(3):
        t = time.perf_counter()
        n, total = db.execute("SELECT COUNT(*), TOTAL(LENGTH(meta)) + TOTAL(LENGTH(blob)) "
                              "FROM tasks WHERE is_template=0").fetchone()
        print(f"{n} rows, {total:.0f} bytes: {(time.perf_counter() - t) * 1e3:.2f} ms")
    db.close()
