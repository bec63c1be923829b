"""The scoring job's vocabulary check on 60,000 ids: a generator over them against min/max
(server/scheduler/base.py's ``score``). ms a call, mean of 20.
    OMP_NUM_THREADS=1 uv run python docs/experiments/session45/id_check.py"""
import timeit

ids, vocab = [5 + i % 97 for i in range(60000)], 65536
gen = timeit.timeit(lambda: any(not 0 <= t < vocab for t in ids), number=20) / 20 * 1e3
mm = timeit.timeit(lambda: not 0 <= min(ids) <= max(ids) < vocab, number=20) / 20 * 1e3
print(f"generator {gen:.2f} ms, min/max {mm:.2f} ms")
