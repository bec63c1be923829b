import json, struct, io, sys, httpx, torch
from harness import send, flags, c
def st(header, body=b""):
    h = json.dumps(header).encode(); h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + body
cfg = None
# a real export to mutate
tid = c.post("/v1/tasks/create", json={"prompt": "hello there", "max_tokens": 2}).json()["task_id"]
import time; time.sleep(1.5)
good = c.get(f"/v1/tasks/{tid}/export_state").content
n = struct.unpack("<Q", good[:8])[0]; hdr = json.loads(good[8:8+n]); body = good[8+n:]
print("meta", hdr["__metadata__"], {k: v for k, v in hdr.items() if k != "__metadata__"})
def mut(**meta):
    h = json.loads(json.dumps(hdr)); h["__metadata__"].update(meta)
    return st(h, body)
cases = {
 "good": good,
 "hist_list": mut(history=[1, 2]), "hist_int": mut(history=5), "hist_dict": mut(history="{}"), "hist_str": mut(history="\"abc\""),
 "hist_deep": mut(history="[" * 50000), "hist_neg": mut(history="[-1]"), "hist_big": mut(history="[" + "9" * 5000 + "]"), "hist_float": mut(history="[1.0]"),
 "cur_bool": mut(current_token="true"), "cur_list": mut(current_token="[1]"), "cur_big": mut(current_token=str(2**70)), "pending_huge": mut(pending=json.dumps([1] * 600000)),
 "hist_huge": mut(history=json.dumps([1] * 600000)), "ver_bad": mut(version="999"), "ver_int": mut(version=1), "fmt_int": mut(format=5),
 "meta_list": st({**{k: v for k, v in hdr.items() if k != "__metadata__"}, "__metadata__": [1]}, body),
 "meta_null": st({**{k: v for k, v in hdr.items() if k != "__metadata__"}, "__metadata__": None}, body),
 "shape_str": st({**hdr, "wkv": {**hdr["wkv"], "shape": ["a"]}}, body), "shape_float": st({**hdr, "wkv": {**hdr["wkv"], "shape": [1.5]}}, body),
 "shape_neg": st({**hdr, "wkv": {**hdr["wkv"], "shape": [-1, -hdr["wkv"]["shape"][0]]}}, body),
 "shape_huge": st({**hdr, "wkv": {**hdr["wkv"], "shape": [2**40, 2**40, 0]}}, body), "shape_bool": st({**hdr, "wkv": {**hdr["wkv"], "shape": [True]}}, body),
 "dtype_f64": st({**hdr, "wkv": {**hdr["wkv"], "dtype": "F64"}}, body), "dtype_bool": st({**hdr, "wkv": {**hdr["wkv"], "dtype": "BOOL"}}, body),
 "dtype_f8": st({**hdr, "wkv": {**hdr["wkv"], "dtype": "F8_E4M3"}}, body), "dtype_weird": st({**hdr, "wkv": {**hdr["wkv"], "dtype": ["F32"]}}, body),
 "offsets_str": st({**hdr, "wkv": {**hdr["wkv"], "data_offsets": ["0", "8"]}}, body), "offsets_float": st({**hdr, "wkv": {**hdr["wkv"], "data_offsets": [0.5, 1e999]}}, body),
 "offsets_3": st({**hdr, "wkv": {**hdr["wkv"], "data_offsets": [0, 1, 2]}}, body), "entry_list": st({**hdr, "wkv": [1, 2]}, body), "entry_null": st({**hdr, "wkv": None}, body),
 "hdr_len_huge": struct.pack("<Q", 2**63) + good[8:], "hdr_len_0": struct.pack("<Q", 0) + good[8:], "hdr_bad_utf8": struct.pack("<Q", 4) + b"{\xff}\x00" + body,
 "hdr_nan": st({}, b"").replace(b"{}", b"{}"),
 "short": b"\x01\x02", "zip_junk": b"PK\x03\x04" + b"\x00" * 100, "legacy": b"\x80\x02" + b"\x00" * 100,
}
# state values: NaN, huge, subnormal in the body
import numpy as np
arr = np.frombuffer(body, dtype=np.uint8).copy()
wb, we = hdr["wkv"]["data_offsets"]
f = arr[wb:we].view(np.float32)
for name, val in (("wkv_nan", np.nan), ("wkv_inf", np.inf), ("wkv_1e38", 3e38), ("wkv_1e30", 1e30)):
    g = f.copy(); g[0] = val; a2 = arr.copy(); a2[wb:we] = g.view(np.uint8)
    cases[name] = st(hdr, a2.tobytes())
# .pth variants
def pth(obj):
    b = io.BytesIO(); torch.save(obj, b); return b.getvalue()
L = hdr["wkv"]["shape"][0]; H, N = hdr["wkv"]["shape"][1], hdr["wkv"]["shape"][2]
cases["pth_ok"] = pth({f"blocks.{i}.att.time_state": torch.zeros(H, N, N) for i in range(L)})
cases["pth_int"] = pth({f"blocks.{i}.att.time_state": torch.zeros(H, N, N, dtype=torch.int64) for i in range(L)})
cases["pth_complex"] = pth({f"blocks.{i}.att.time_state": torch.zeros(H, N, N, dtype=torch.complex64) for i in range(L)})
cases["pth_f8"] = pth({f"blocks.{i}.att.time_state": torch.zeros(H, N, N).to(torch.float8_e4m3fn) for i in range(L)})
cases["pth_nested"] = pth({"a": {"b": torch.zeros(1)}})
cases["pth_list"] = pth([torch.zeros(1)])
cases["pth_int_key"] = pth({1: torch.zeros(1)})
cases["pth_strided"] = pth({f"blocks.{i}.att.time_state": torch.zeros(H, N, 2 * N)[:, :, ::2] for i in range(L)})
cases["pth_extra_layer"] = pth({f"blocks.{i}.att.time_state": torch.zeros(H, N, N) for i in range(L + 1)})
cases["pth_layer_neg"] = pth({**{f"blocks.{i}.att.time_state": torch.zeros(H, N, N) for i in range(L)}, "blocks.-1.att.time_state": torch.zeros(1)})
cases["pth_layer_big"] = pth({**{f"blocks.{i}.att.time_state": torch.zeros(H, N, N) for i in range(L)}, "blocks.99999999999999999999999.att.time_state": torch.zeros(1)})
cases["pth_layer_lead0"] = pth({f"blocks.0{i}.att.time_state": torch.zeros(H, N, N) for i in range(L)})
cases["pth_layer_unicode_digit"] = pth({f"blocks.{chr(0x660 + i) if i < 10 else i}.att.time_state": torch.zeros(H, N, N) for i in range(L)})
for i, (k, v) in enumerate(cases.items()):
    r = send(f"import {k}", "POST", f"/v1/tasks/import_state?name=fz{i}", raw=v, headers={"content-type": "application/octet-stream"})
    if r is not None and r.status_code == 200:
        t = r.json()["task_id"]
        send(f"  fork {k}", "POST", f"/v1/tasks/{t}/fork?tmp=true", body={"max_tokens": 2, "prompt": "x"})
        send(f"  chat {k}", "POST", "/v1/chat/completions", body={"model": f"rwkv-7:{t}", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2})
        send(f"  comp {k}", "POST", "/v1/completions", body={"model": f"rwkv-7:{t}", "prompt": "x", "max_tokens": 2, "echo": True, "logprobs": 2})
        send(f"  comp-noprompt {k}", "POST", "/v1/completions", body={"model": f"rwkv-7:{t}", "prompt": "", "max_tokens": 2})
        send(f"  comp-ids {k}", "POST", "/v1/completions", body={"model": f"rwkv-7:{t}", "prompt": [], "max_tokens": 2, "suffix": "s"})
        send(f"  export {k}", "GET", f"/v1/tasks/{t}/export_state")
        send(f"  del {k}", "POST", f"/v1/tasks/{t}/delete?force=true")
print("FLAGS", len(flags))
for f in flags: print(f)
