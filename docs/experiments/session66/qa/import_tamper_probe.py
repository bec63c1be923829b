"""Tampered exports for POST /v1/tasks/import_state (item 2): takes a real export of a task,
rewrites its safetensors header/metadata, imports each variant; then forks every accepted one.
    uv run python docs/experiments/session66/qa/import_tamper_probe.py http://localhost:8811
"""
import json, struct, sys, time
import httpx

URL = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8811"
c = httpx.Client(base_url=URL, timeout=60)
r = c.post("/v1/tasks/create", json={"prompt": "User: hi\n\nAssistant:", "max_tokens": 5, "temperature": 0})
tid = r.json()["task_id"]
for _ in range(100):
    if c.get(f"/v1/tasks/{tid}/get_result").json()["finished"]:
        break
    time.sleep(0.1)
data = c.get(f"/v1/tasks/{tid}/export_state").content
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n]); body = data[8 + n:]
print("metadata keys:", {k: (v[:60] if isinstance(v, str) else v) for k, v in header["__metadata__"].items()})
print("tensors:", {k: (v["dtype"], v["shape"]) for k, v in header.items() if k != "__metadata__"})


def build(h, b=body):
    raw = json.dumps(h).encode(); raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + b


def variant(name, fn, b=body):
    h = json.loads(json.dumps(header)); fn(h)
    r = c.post(f"/v1/tasks/import_state?name=qa_tamper_{name}_{int(time.time()*1000)%100000}", content=build(h, b))
    line = f"{name:26s} {r.status_code} {r.text[:200]}"
    if r.status_code == 200:
        f = c.post(f"/v1/tasks/{r.json()['task_id']}/fork?tmp=true", json={"prompt": "x", "max_tokens": 3, "stream": True})
        line += f"\n{'':26s} fork -> {f.status_code} {f.text[-160:]!r}"
    print(line)


M = "__metadata__"
variant("history_big_id", lambda h: h[M].update(history=json.dumps([70000])))
variant("history_neg", lambda h: h[M].update(history=json.dumps([-1])))
variant("history_not_list", lambda h: h[M].update(history=json.dumps({"a": 1})))
variant("history_str_ids", lambda h: h[M].update(history=json.dumps(["1"])))
variant("history_bool", lambda h: h[M].update(history=json.dumps([True])))
variant("history_nested", lambda h: h[M].update(history="[" * 100000 + "]" * 100000))
variant("history_long", lambda h: h[M].update(history=json.dumps([5] * 200000)))
variant("history_raw_list", lambda h: h[M].update(history=[1, 2]))
variant("current_oob", lambda h: h[M].update(current_token="70000"))
variant("current_str", lambda h: h[M].update(current_token='"a"'))
variant("pending_many", lambda h: h[M].update(pending=json.dumps([1] * 1000)))
variant("pending_oob", lambda h: h[M].update(pending=json.dumps([99999])))
variant("no_history", lambda h: h[M].pop("history", None))
variant("meta_not_obj", lambda h: h.update({M: [1]}))
variant("meta_int_vals", lambda h: h[M].update(task_id=5))
variant("drop_shift", lambda h: h.pop("shift"))
variant("wkv_shape_swapped", lambda h: h["wkv"].update(shape=list(reversed(h["wkv"]["shape"]))))
variant("penalties_shape", lambda h: h["penalties"].update(shape=[h["penalties"]["shape"][0] // 2, 2]) if "penalties" in h else None)
variant("version_int", lambda h: h[M].update(version=1))
variant("extra_tensor", lambda h: h.update(extra={"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}))
variant("offsets_overlap", lambda h: h["wkv"].update(data_offsets=h["shift"]["data_offsets"]) if h["wkv"]["shape"] else None)
variant("dtype_f16_mismatch", lambda h: h["shift"].update(dtype="F16"))
# all-NaN shift bytes
sh = header["shift"]["data_offsets"]
nanbody = bytearray(body); nanbody[sh[0]:sh[1]] = b"\x00\x00\xc0\x7f" * ((sh[1] - sh[0]) // 4)
variant("shift_nan", lambda h: None, bytes(nanbody))
big = bytearray(body); big[sh[0]:sh[1]] = struct.pack("<f", 1e30) * ((sh[1] - sh[0]) // 4)
variant("shift_1e30", lambda h: None, bytes(big))
print("health:", c.get("/health").json()["status"])
