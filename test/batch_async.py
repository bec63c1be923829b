"""Many concurrent streamed requests from asyncio (httpx.AsyncClient); prints throughput.

    uv run python test/batch_async.py --url http://localhost:8000 --n 256 --concurrency 64 \
        --max-tokens 200 --api openai
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (StreamMeter, format_report, headers_for, parse_args,  # noqa: E402
                          request_for, summarize)

POOL = 32  # connections a client at most


async def send_one(clients: list[httpx.AsyncClient], loads: list[int], gate: asyncio.Semaphore,
                   args, index: int) -> StreamMeter:
    """Send request `index` once `gate` admits it, through the client with the fewest requests
    in flight (`loads`), and consume its stream."""
    path, body = request_for(args.api, index, args.max_tokens, args.temperature, args.model)
    async with gate:
        k = loads.index(min(loads))  # at most concurrency in flight: no pool is ever short
        loads[k] += 1
        client = clients[k]
        meter = StreamMeter(args.api)
        try:
            async with client.stream("POST", path, json=body) as resp:
                if resp.status_code == 200:
                    async for line in resp.aiter_lines():
                        meter.feed(line)
                    meter.finish()
                else:
                    meter.finish(resp.status_code, (await resp.aread()).decode(errors="replace"))
        except httpx.HTTPError as exc:
            meter.failed(exc)
        finally:
            loads[k] -= 1
    return meter


async def run_batch_async(args, transport: httpx.AsyncBaseTransport | None = None) -> dict:
    """Send `args.n` requests, `args.concurrency` at most in flight; return `summarize`'s dict.
    The connections are spread over clients of at most POOL each: a client scans its whole
    pool for every request it places, so one client of 256 connections spent most of this
    process's time there (on a 2-core CPU) and sent its requests late."""
    pools = -(-args.concurrency // POOL)
    per_pool = -(-args.concurrency // pools)
    limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
    gate = asyncio.Semaphore(args.concurrency)
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(httpx.AsyncClient(
            base_url=args.url, headers=headers_for(args), timeout=args.timeout, limits=limits,
            transport=transport)) for _ in range(pools)]
        start = time.perf_counter()
        loads = [0] * pools
        meters = await asyncio.gather(*(send_one(clients, loads, gate, args, i)
                                        for i in range(args.n)))
        seconds = time.perf_counter() - start
    return summarize(list(meters), seconds)


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit status 1 when any request failed."""
    args = parse_args("Concurrent streamed requests with asyncio + httpx.AsyncClient.", argv)
    figures = asyncio.run(run_batch_async(args))
    print(format_report(figures, f"batch_async  api={args.api}  n={args.n}  "
                                 f"concurrency={args.concurrency}  max_tokens={args.max_tokens}"))
    return 1 if figures["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
