"""storage_keys timing on pickles of real RWKV-7 layouts (13.3b's keys, tiny storages of the
real dtypes via meta->empty(1)) and a 20k-tensor pickle; protocols 2 and 5."""
import io, time, zipfile, torch
from server.model.presets import PRESETS
from server.model.random import preset_config
from server.model.checkpoint import expected_shapes
from server.model.verify import storage_keys, missing_entries
for name in ("2.9b", "13.3b"):
    shapes = expected_shapes(preset_config(name))
    sd = {k: torch.empty(1, dtype=torch.bfloat16).expand(*s) if False else torch.zeros(1, dtype=torch.bfloat16)
          for k, s in shapes.items()}
    for proto in (2, 5):
        b = io.BytesIO(); torch.save(sd, b, pickle_protocol=proto)
        z = zipfile.ZipFile(io.BytesIO(b.getvalue()))
        pkl = [n for n in z.namelist() if n.endswith("data.pkl")][0]
        data = z.read(pkl)
        t = time.perf_counter(); k = storage_keys(data); dt = time.perf_counter() - t
        print(name, "proto", proto, "tensors", len(sd), "pkl bytes", len(data), "keys", len(k),
              f"{dt*1000:.1f} ms", "missing", missing_entries(z))
sd = {f"t{i}": torch.zeros(1) for i in range(20000)}
b = io.BytesIO(); torch.save(sd, b); z = zipfile.ZipFile(io.BytesIO(b.getvalue()))
data = z.read([n for n in z.namelist() if n.endswith("data.pkl")][0])
t = time.perf_counter(); k = storage_keys(data); print("20k tensors", len(k), f"{(time.perf_counter()-t)*1000:.0f} ms")
