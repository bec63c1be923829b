"""Session 54's security review, the state-file pickle limit: a torch.save of N one-element
views of one storage has a handful of zip entries (the entry count passes it) and a pickle of
~70 bytes a view; torch.load's time for it, and whether read_state_file refuses it first.
Run from the repository root: PYTHONPATH=. uv run python docs/experiments/session54/review/many_views.py"""
import io
import time
import zipfile

import torch

from server.task.state_file import MAX_PICKLE, StateFileError, _check_zip

for n in (10_000, 100_000):
    base = torch.zeros(4)
    buf = io.BytesIO()
    torch.save({f"k{i}": base[0:1] for i in range(n)}, buf)
    data = buf.getvalue()
    infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    pkl = sum(i.file_size for i in infos if i.filename.endswith(".pkl"))
    t = time.perf_counter()
    torch.load(io.BytesIO(data), weights_only=True)
    load_s = time.perf_counter() - t
    try:
        _check_zip(data)
        verdict = "accepted"
    except StateFileError as e:
        verdict = f"refused: {e}"
    print(f"{n:,} views: {len(data):,} bytes, {len(infos)} zip entries, pickle {pkl:,} bytes "
          f"(limit {MAX_PICKLE:,}); torch.load {load_s:.2f} s; check: {verdict}")
