"""Resident memory and start-up time of the native tokenizer (0b2e531's tree, withdrawn):
RSS after the Python trie, then after pyrwkv_tokenizer.RWKVTokenizer(); Tokenizer() with and
without it. Run from a checkout of 0b2e531:
    OMP_NUM_THREADS=1 PYTHONPATH=. uv run python PATH/memory_start.py"""
import time


def rss_mb() -> int:
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024


print("start", rss_mb(), "MB")
from server.model.tokenizer import Tokenizer  # noqa: E402

t0 = time.perf_counter()
Tokenizer(native=False)
print(f"Tokenizer(native=False): {time.perf_counter() - t0:.2f} s, RSS {rss_mb()} MB")
import pyrwkv_tokenizer  # noqa: E402

t0 = time.perf_counter()
pyrwkv_tokenizer.RWKVTokenizer()
print(f"pyrwkv_tokenizer.RWKVTokenizer(): {time.perf_counter() - t0:.2f} s, RSS {rss_mb()} MB")
t0 = time.perf_counter()
Tokenizer()
print(f"Tokenizer() (native): {time.perf_counter() - t0:.2f} s, RSS {rss_mb()} MB")
