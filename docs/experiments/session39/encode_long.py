"""(Needs 0b2e531's tree: Tokenizer(native=...); native_tokenizer.diff.)
A long document (README.md + few_shot.txt, 8 times: ~392 KB) encoded by the Python trie
(Tokenizer(native=False)) and by the native tokenizer (Tokenizer()), alternating twice.
    OMP_NUM_THREADS=1 PYTHONPATH=. uv run python docs/experiments/session39/encode_long.py"""
import time

from server.model.tokenizer import Tokenizer

text = (open("README.md").read() + open("few_shot.txt").read()) * 8
py, nat = Tokenizer(native=False), Tokenizer()
ref = py.encode(text)
for name, t in (("python", py), ("native", nat), ("python", py), ("native", nat)):
    t0 = time.perf_counter()
    ids = t.encode(text)
    dt = time.perf_counter() - t0
    assert ids == ref
    print(f"{name}: {len(text.encode())} bytes, {len(ids)} tokens in {dt * 1e3:.1f} ms")
