"""How long one generation-0 collection of 50,000 young objects takes (RWKV_GC_THRESHOLD's
default: at most that many accumulate before one runs), for two kinds of young objects:
50,000 one-item lists, and 50,000 small dicts beside 25 lists of 2,000 ints (token lists).
Median of 5.
    python docs/experiments/session39/gc_pause.py"""
import gc
import statistics
import time


def TOKENS():
    return [list(range(2000)) for _ in range(25)]


def pause_ms(make) -> float:
    runs = []
    for _ in range(5):
        gc.collect()
        gc.disable()
        keep = make()
        t0 = time.perf_counter()
        gc.collect(0)
        runs.append((time.perf_counter() - t0) * 1e3)
        gc.enable()
        del keep
    return statistics.median(runs)


print(f"50,000 one-item lists: {pause_ms(lambda: [[i] for i in range(50_000)]):.2f} ms")
print("50,000 dicts + 25 lists of 2,000 ints: "
      f"{pause_ms(lambda: TOKENS() + [{'a': i} for i in range(50_000)]):.2f} ms")
