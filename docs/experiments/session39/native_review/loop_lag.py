"""The event loop's worst lag while a long text is encoded in a worker thread
(asyncio.to_thread, as server/api/encoding.py does), GIL switch interval at the serving 100 us,
a 1 ms ticker on the loop: the Python trie against the native tokenizer (0b2e531's tree,
withdrawn). Run from a checkout of 0b2e531:
    OMP_NUM_THREADS=1 PYTHONPATH=. uv run python PATH/loop_lag.py"""
import asyncio
import sys
import time

from server.model.tokenizer import ReusingEncoder, Tokenizer

sys.setswitchinterval(1e-4)
base = open("few_shot.txt").read()


async def measure(enc, text) -> tuple[float, float]:
    lags = []

    async def ticker():
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t - 0.001)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    t0 = time.perf_counter()
    await asyncio.to_thread(enc.encode, text)
    took = time.perf_counter() - t0
    tick.cancel()
    return took, max(lags)


for size in (500_000, 8_000_000):
    text = (base * (size // len(base.encode()) + 1))[:size]
    for native in (False, True):
        took, lag = asyncio.run(measure(ReusingEncoder(Tokenizer(native=native)), text))
        print(f"{size // 1000} KB, native={native}: encode {took:.3f} s, "
              f"worst event-loop lag {lag * 1e3:.1f} ms")
