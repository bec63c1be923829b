"""Many concurrent streamed requests from a thread pool (httpx.Client); prints throughput.

    uv run python test/batch_sync.py --url http://localhost:8000 --n 64 --concurrency 16 \
        --max-tokens 200 --api tasks
"""
from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (StreamMeter, format_report, headers_for, parse_args,  # noqa: E402
                          request_for, summarize)


def send_one(client: httpx.Client, args, index: int) -> StreamMeter:
    """Send request `index` and consume its stream; transport errors become the meter's error."""
    path, body = request_for(args.api, index, args.max_tokens, args.temperature, args.model)
    meter = StreamMeter(args.api)
    try:
        with client.stream("POST", path, json=body) as resp:
            if resp.status_code == 200:
                for line in resp.iter_lines():
                    meter.feed(line)
                meter.finish()
            else:
                meter.finish(resp.status_code, resp.read().decode(errors="replace"))
    except httpx.HTTPError as exc:
        meter.failed(exc)
    return meter


def run_batch(args, transport: httpx.BaseTransport | None = None) -> dict:
    """Send `args.n` requests, `args.concurrency` at a time; return `summarize`'s figures."""
    limits = httpx.Limits(max_connections=args.concurrency,
                          max_keepalive_connections=args.concurrency)
    with httpx.Client(base_url=args.url, headers=headers_for(args), timeout=args.timeout,
                      limits=limits, transport=transport) as client:
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            meters = list(pool.map(lambda i: send_one(client, args, i), range(args.n)))
        seconds = time.perf_counter() - start
    return summarize(meters, seconds)


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit status 1 when any request failed."""
    args = parse_args("Concurrent streamed requests with threads + httpx.Client.", argv)
    figures = run_batch(args)
    print(format_report(figures, f"batch_sync  api={args.api}  n={args.n}  "
                                 f"concurrency={args.concurrency}  max_tokens={args.max_tokens}"))
    return 1 if figures["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
