import json, sqlite3, sys, collections, httpx, time
ids = json.load(open(sys.argv[1])); DB = sys.argv[2]; BASE = "http://127.0.0.1:8101"
c = httpx.Client(timeout=30)
st = collections.Counter(); bad = []
for tid, op in ids["created"].items():
    r = c.get(f"{BASE}/v1/tasks/{tid}/status")
    if r.status_code == 404: st[(op, "404")] += 1; continue
    s = r.json()["status"]; st[(op, s)] += 1
    if s != 3: bad.append((tid, op, r.json()))
print("status by op:", dict(st)); print("not finished:", bad[:20], len(bad))
db = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
rows = {r[0]: r[1] for r in db.execute("select task_id, is_template from tasks")}
dead = [d for d in ids["deleted"] if d in rows]
print("rows", len(rows), "templates", sum(rows.values()), "deleted ids still in DB:", len(dead), dead[:5])
tdead = [d for d in ids["tpl_deleted"] if d in rows]; tlive = [d for d in ids["tpl_live"] if d not in rows]
print("deleted templates still in DB:", len(tdead), "live templates missing from DB:", len(tlive))
print("tmp ids in DB:", sum(1 for k in rows if k.startswith("TMP")))
pc, fl, ps = [db.execute(f"pragma {p}").fetchone()[0] for p in ("page_count", "freelist_count", "page_size")]
tot = db.execute("select sum(length(meta)+coalesce(length(blob),0)), avg(length(blob)) from tasks").fetchone()
print(f"pages {pc} free {fl} page_size {ps} file~{pc*ps/1e6:.1f}MB rowbytes {tot[0]/1e6:.1f}MB avgblob {tot[1]:.0f}")
print("pragma auto_vacuum", db.execute("pragma auto_vacuum").fetchone())
t = time.time(); r = c.get(f"{BASE}/v1/tasks/list?offset=0&limit=100"); print("list ms", (time.time()-t)*1e3)
db.close()
