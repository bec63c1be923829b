"""rows.py DB [OUT.json] -- dump rows digest of a copy of DB (copies db+wal+shm to a temp dir first)"""
import sqlite3, sys, hashlib, json, shutil, tempfile, os
src = sys.argv[1]
d = tempfile.mkdtemp()
for ext in ("", "-wal", "-shm"):
    if os.path.exists(src + ext):
        shutil.copy(src + ext, d + "/x.db" + ext)
db = sqlite3.connect(d + "/x.db")
out = {"user_version": db.execute("PRAGMA user_version").fetchone()[0],
       "integrity": db.execute("PRAGMA integrity_check").fetchone()[0],
       "auto_vacuum": db.execute("PRAGMA auto_vacuum").fetchone()[0],
       "journal": db.execute("PRAGMA journal_mode").fetchone()[0], "rows": {}}
for tid, tpl, upd, meta, blob in db.execute("SELECT task_id,is_template,updated_at,meta,blob FROM tasks ORDER BY task_id"):
    m = json.loads(meta)
    out["rows"][tid] = {"tpl": tpl, "upd": upd, "meta": hashlib.sha256(meta.encode()).hexdigest()[:12],
                        "blob": hashlib.sha256(blob or b"").hexdigest()[:12], "blen": len(blob or b""),
                        "keys": sorted(m.keys()), "status": m.get("status"), "nout": len(m.get("output", [])),
                        "npend": len(m.get("pending", []))}
shutil.rmtree(d)
if len(sys.argv) > 2:
    json.dump(out, open(sys.argv[2], "w"), indent=1)
print(json.dumps({k: v for k, v in out.items() if k != "rows"}), len(out["rows"]), "rows")
for t, r in out["rows"].items():
    print(f"  {t[:40]:40} tpl={r['tpl']} status={r['status']} nout={r['nout']} npend={r['npend']} blen={r['blen']} meta={r['meta']} blob={r['blob']}")
