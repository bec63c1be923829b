"""Probes POST /v1/tasks/import_state with bad state files (item 2 of session 66's QA brief)
and the export -> import round trip (same greedy output from the task and its imported copy).

Run against a demo server (tiny preset: L2 C128, H2 N64):
    RWKV_TASK_DB_PATH=/tmp/qa66/main.db uv run python run.py --demo tiny --port 8811 &
    uv run python docs/experiments/session66/qa/import_probe.py http://localhost:8811
Prints one line per case: name, status, body (cut). Any 5xx / hang / side effect is a defect.
"""
import io, json, os, pickle, struct, sys, time, zipfile
import httpx, torch

URL = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8811"
c = httpx.Client(base_url=URL, timeout=60)
L, C, H, N = 2, 128, 2, 64
MARK = "/tmp/qa66/PWNED"


def pth(obj):
    b = io.BytesIO(); torch.save(obj, b); return b.getvalue()


def st(tensors, meta=None):  # minimal safetensors writer
    header, blobs, off = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for k, (dt, shape, raw) in tensors.items():
        header[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw); off += len(raw)
    h = json.dumps(header).encode(); h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


class Evil:
    def __reduce__(self):
        return (os.system, (f"touch {MARK}",))


good = {f"blocks.{i}.att.time_state": torch.randn(H, N, N) * 0.1 for i in range(L)}
cases = {
    "good_pth": pth(good),
    "wrong_shape": pth({f"blocks.{i}.att.time_state": torch.randn(H, N, N + 1) for i in range(L)}),
    "wrong_layers": pth({f"blocks.{i}.att.time_state": torch.randn(H, N, N) for i in range(L + 1)}),
    "int_dtype": pth({f"blocks.{i}.att.time_state": torch.ones(H, N, N, dtype=torch.int32) for i in range(L)}),
    "fp64": pth({f"blocks.{i}.att.time_state": torch.randn(H, N, N, dtype=torch.float64) for i in range(L)}),
    "complex": pth({f"blocks.{i}.att.time_state": torch.randn(H, N, N, dtype=torch.complex64) for i in range(L)}),
    "nan": pth({f"blocks.{i}.att.time_state": torch.full((H, N, N), float("nan")) for i in range(L)}),
    "huge_vals": pth({f"blocks.{i}.att.time_state": torch.full((H, N, N), 1e38) for i in range(L)}),
    "non_tensor": pth({f"blocks.{i}.att.time_state": [1, 2, 3] for i in range(L)}),
    "list_top": pth([torch.zeros(3)]),
    "nested_dict": pth({"state": good}),
    "int_keys": pth({0: torch.zeros(H, N, N)}),
    "sparse": pth({f"blocks.{i}.att.time_state": torch.zeros(H, N, N).to_sparse() for i in range(L)}),
    "noncontig": pth({f"blocks.{i}.att.time_state": torch.randn(H, N, N).transpose(1, 2) for i in range(L)}),
    "pickle_code_raw": pickle.dumps(Evil()),
    "pickle_code_pth": pth({"x": Evil()}) if False else None,
    "truncated_pth": pth(good)[: len(pth(good)) // 2],
    "empty": b"",
    "one_byte": b"\x80",
    "text": b"hello world, not a state",
    "zip_garbage": b"PK\x03\x04" + b"\x00" * 100,
    "st_good_shape_wrong_meta": st({"shift": ("F32", [L, 2, C], bytes(4 * L * 2 * C)),
                                     "wkv": ("F32", [L, H, N, N], bytes(4 * L * H * N * N))},
                                    {"format": "rwkv-server-state", "version": "999"}),
    "st_bad_dtype": st({"blocks.0.att.time_state": ("Q4", [H, N, N], bytes(H * N * N))}),
    "st_truncated": st({f"blocks.{i}.att.time_state": ("F32", [H, N, N], bytes(4 * H * N * N)) for i in range(L)})[:-100],
    "st_time_state_f16": st({f"blocks.{i}.att.time_state": ("F16", [H, N, N], bytes(2 * H * N * N)) for i in range(L)}),
    "st_time_state_bool": st({f"blocks.{i}.att.time_state": ("BOOL", [H, N, N], bytes(H * N * N)) for i in range(L)}),
    "st_header_huge_len": struct.pack("<Q", 2**63) + b"{}",
    "st_scalar": st({"blocks.0.att.time_state": ("F32", [], bytes(4)), "blocks.1.att.time_state": ("F32", [], bytes(4))}),
}
# a torch.save zip whose data.pkl carries a code-executing reduce
buf = io.BytesIO()
try:
    torch.save({"x": Evil()}, buf)
    cases["pickle_code_pth"] = buf.getvalue()
except Exception as e:
    cases.pop("pickle_code_pth")
    print("could not build pickle_code_pth:", e)
cases = {k: v for k, v in cases.items() if v is not None}

if os.path.exists(MARK):
    os.remove(MARK)
for name, data in cases.items():
    t0 = time.time()
    try:
        r = c.post(f"/v1/tasks/import_state?name=qa_{name}", content=data,
                   headers={"Content-Type": "application/octet-stream"})
        print(f"{name:28s} {r.status_code} {time.time()-t0:5.2f}s {r.text[:230]}")
    except Exception as e:
        print(f"{name:28s} EXC {e!r}")
print("code executed:", os.path.exists(MARK))
print("health:", c.get("/health").json()["status"])

# name checks
for nm in ["", "_", "a b", "x" * 101, "../etc", "qa_good_pth"]:
    r = c.post("/v1/tasks/import_state", params={"name": nm}, content=pth(good))
    print(f"name={nm[:20]!r:24s} {r.status_code} {r.text[:160]}")
r = c.post("/v1/tasks/import_state", content=pth(good))
print("no name:", r.status_code, r.text[:160])

# use the imported state-tuning template
r = c.post("/v1/tasks/_qa_good_pth/fork?tmp=true", json={"prompt": "Hi", "max_tokens": 5, "temperature": 0})
print("fork imported:", r.status_code, r.text[:200])
r = c.post("/v1/chat/completions", json={"model": "rwkv-7:_qa_good_pth", "max_tokens": 5, "temperature": 0,
                                           "messages": [{"role": "user", "content": "Hi"}]})
print("chat from imported:", r.status_code, r.text[:200])
print("models lists it:", "rwkv-7:_qa_good_pth" in r.text or "rwkv-7:_qa_good_pth" in c.get("/v1/models").text)

# export -> import round trip: greedy continuation must match
def wait(tid):
    for _ in range(600):
        g = c.get(f"/v1/tasks/{tid}/get_result").json()
        if g["finished"]:
            return g["result"]
        time.sleep(0.1)
r = c.post("/v1/tasks/create", json={"prompt": "User: tell me a story\n\nAssistant:", "max_tokens": 20, "temperature": 0})
tid = r.json()["task_id"]; wait(tid)
exp = c.get(f"/v1/tasks/{tid}/export_state")
print("export:", exp.status_code, len(exp.content), exp.headers.get("content-type"))
rt = f"qa_rt_{int(time.time())}"
r = c.post(f"/v1/tasks/import_state?name={rt}", content=exp.content)
print("import export:", r.status_code, r.text[:150])
outs = []
for src in (tid, "_" + rt):
    r = c.post(f"/v1/tasks/{src}/fork?tmp=true", json={"prompt": " And then", "max_tokens": 30, "temperature": 0, "seed": 1})
    fid = r.json()["task_id"]; outs.append(wait(fid))
print("round trip equal:", outs[0] == outs[1], repr(outs[0][:60]), repr(outs[1][:60]))
# continue on imported template (read-only) should be refused
r = c.post(f"/v1/tasks/_{rt}/continue", json={"prompt": "x", "max_tokens": 2})
print("continue template:", r.status_code, r.text[:150])
# export a template, a running/unknown task
print("export unknown:", c.get("/v1/tasks/TASK_nope/export_state").status_code)
print("export template:", c.get(f"/v1/tasks/_{rt}/export_state").status_code)
