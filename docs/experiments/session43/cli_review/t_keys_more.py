"""storage_keys on sparse / quantized / raw storages / nested tensors / requires_grad, plus a
truncated-archive check (entries dropped) that must be reported."""
import io, zipfile, torch
from server.model.verify import storage_keys, missing_entries
def check(name, obj, proto=2):
    b = io.BytesIO()
    try:
        torch.save(obj, b, pickle_protocol=proto)
    except Exception as e:
        print(name, "save failed", e); return
    z = zipfile.ZipFile(io.BytesIO(b.getvalue()))
    real = {n.split("/data/", 1)[1] for n in z.namelist() if "/data/" in n}
    k = storage_keys(z.read([n for n in z.namelist() if n.endswith("data.pkl")][0]))
    print(f"{name:12s} p{proto} keys={sorted(k)} real={sorted(real)} missing={missing_entries(z)}")
check("sparse", {"s": torch.eye(3).to_sparse()})
check("sparse_csr", {"s": torch.eye(3).to_sparse_csr()})
check("quant", {"q": torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.quint8)})
check("untyped", {"u": torch.UntypedStorage(8)})
check("typed", {"t": torch.FloatStorage(3) if hasattr(torch, "FloatStorage") else None})
check("grad", {"g": torch.randn(2, requires_grad=True)})
try:
    check("nested", {"n": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])})
except Exception as e: print("nested", e)
for p in (2, 4, 5):
    check("sparse", {"s": torch.eye(3).to_sparse(), "x": [torch.ones(1)] * 3}, p)
# truncated: drop the last two data records
b = io.BytesIO(); torch.save({f"k{i}": torch.ones(2) * i for i in range(5)}, b)
src = zipfile.ZipFile(io.BytesIO(b.getvalue())); out = io.BytesIO()
with zipfile.ZipFile(out, "w") as dst:
    for n in src.namelist():
        if not n.endswith(("data/3", "data/4")):
            dst.writestr(n, src.read(n))
print("cut:", missing_entries(zipfile.ZipFile(io.BytesIO(out.getvalue()))))
