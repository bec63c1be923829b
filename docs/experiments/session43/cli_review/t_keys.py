"""storage_keys / missing_entries on checkpoints saved in varied ways: every one must have
no missing entries, and the keys found must equal the real storage records."""
import io, os, pickle, zipfile, collections, sys, time
import torch
from server.model.verify import storage_keys, missing_entries, damaged_entries
D = "/tmp/qa43/review2/ck"

def real_keys(path):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    return {n.split("/data/", 1)[1] for n in names if "/data/" in n}

base = torch.randn(8, 8)
cases = {}
sd = collections.OrderedDict((f"blocks.{i}.w", torch.randn(4, 4).to(torch.bfloat16)) for i in range(5))
cases["plain"] = sd
cases["shared_views"] = {"a": base, "b": base[2:], "c": base.t(), "d": base.view(64), "e": base}
cases["nested"] = {"cfg": {"n": 3, "name": "x", "f": 1.5, "l": [1, 2, (3, 4)], "none": None, "b": True,
                   "bytes": b"abc", "set": {1, 2}, "fs": frozenset({3})},
                   "list": [torch.ones(2), [torch.zeros(3), {"t": torch.arange(5)}]],
                   "tup": (torch.ones(1), torch.ones(1, dtype=torch.int64))}
cases["param"] = {"p": torch.nn.Parameter(torch.randn(3)), "buf": torch.randn(2)}
cases["empty_tensors"] = {"e": torch.empty(0), "e2": torch.empty(0, 5), "x": torch.ones(2)}
cases["scalars"] = {"s": torch.tensor(3.0), "i": torch.tensor(7)}
cases["module_sd"] = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4)).state_dict()
cases["many_1500"] = {f"k{i}": torch.ones(1) * i for i in range(1500)}  # SETITEMS batched
cases["same_key_strings"] = {"a": torch.ones(2), "a2": torch.ones(2)}
cases["dtypes"] = {str(d): torch.ones(2, dtype=d) for d in (torch.float16, torch.bfloat16, torch.float32,
                   torch.float64, torch.int8, torch.uint8, torch.bool, torch.complex64)}
cases["meta"] = {"m": torch.empty(3, device="meta"), "x": torch.ones(1)}
cases["tensor_top"] = torch.randn(4)
cases["noncontig_storage_offset"] = {"v": torch.randn(100)[10:20]}

bad = 0
for name, obj in cases.items():
    for proto in (1, 2, 3, 4, 5):
        for newzip in (True,):
            p = f"{D}/{name}.p{proto}.pth"
            try:
                torch.save(obj, p, pickle_protocol=proto, _use_new_zipfile_serialization=newzip)
            except Exception as e:
                print("SAVE FAIL", name, proto, type(e).__name__, e); continue
            with zipfile.ZipFile(p) as z:
                pkl = [n for n in z.namelist() if n.endswith("data.pkl")][0]
                keys = storage_keys(z.read(pkl))
                miss = missing_entries(z)
            rk = real_keys(p)
            ok = (keys == rk) and not miss and not damaged_entries(p)
            if not ok:
                bad += 1
                print("MISMATCH", name, proto, "keys", sorted(keys)[:5], "real", sorted(rk)[:5], "miss", miss[:5])
            # loadable?
            torch.load(p, weights_only=False)
print("cases x protocols done; mismatches:", bad)

# legacy (non-zip) save
p = f"{D}/legacy.pth"; torch.save(sd, p, _use_new_zipfile_serialization=False)
print("legacy is zip:", zipfile.is_zipfile(p))

# BytesIO save + file object save
buf = io.BytesIO(); torch.save(sd, buf); open(f"{D}/bio.pth", "wb").write(buf.getvalue())
print("bytesio missing:", damaged_entries(f"{D}/bio.pth"))
