import httpx, json, struct, sys, numpy as np
ta, tb = sys.argv[1], sys.argv[2]
def parse(b):
    n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8+n]); data = b[8+n:]
    return h, data
ea = httpx.get(f"http://localhost:18961/v1/tasks/{ta}/export_state").content
eb = httpx.get(f"http://localhost:18962/v1/tasks/{tb}/export_state").content
ha, da = parse(ea); hb, db = parse(eb)
print("meta A", ha.get("__metadata__")); print("meta B", hb.get("__metadata__"))
for k in ha:
    if k == "__metadata__": continue
    a = ha[k]; b = hb[k]
    xa = da[a["data_offsets"][0]:a["data_offsets"][1]]; xb = db[b["data_offsets"][0]:b["data_offsets"][1]]
    if xa != xb:
        fa = np.frombuffer(xa, dtype=np.float32) if a["dtype"]=="F32" else None
        fb = np.frombuffer(xb, dtype=np.float32) if b["dtype"]=="F32" else None
        print("TENSOR DIFF", k, a["dtype"], a["shape"], (np.abs(fa-fb).max() if fa is not None else ""), int((fa!=fb).sum()) if fa is not None else "")
    else: print("same", k, a["shape"])
