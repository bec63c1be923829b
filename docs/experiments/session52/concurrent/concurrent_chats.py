"""How much of a chat's prompt the prefix cache saves when many chats run at once.

    uv run python docs/experiments/session52/concurrent/concurrent_chats.py --chats 1,8,32 \
        --turns 6 --demo tiny

For each number of chats: a fresh ``run.py --demo`` server with the cache on; that many
conversations (server.bench.conversation: a system prompt, then per turn one user message)
run side by side, each turn a non-streamed, greedy ``/v1/chat/completions`` request sent as
soon as the chat's previous reply came back. Printed per run: the prompt tokens sent over all
turns, the tokens prefilled before first tokens (``/health``: ``prefilled_tokens``), the tokens
computed after them (``later_tokens`` + ``warm_tokens``), and the tokens a perfect cache would
prefill (each chat's first prompt, then per turn only what is new since the last reply: the
user message and the chat template's framing around it), with ``warm_dropped`` and
``boundaries_kept``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

import httpx

from server.bench.chat import start_server
from server.bench.conversation import Conversation


async def one_chat(client: httpx.AsyncClient, tok, turns: int, target: int, reply: int,
                   i: int) -> list[int]:
    conv = Conversation(tok, turns, target, reply, system=f"You are assistant number {i}. ")
    sizes = []
    for t in range(turns):
        r = await client.post("/v1/chat/completions", json={
            "model": "rwkv-7", "messages": conv.ask(t), "max_tokens": reply,
            "temperature": 0, "reasoning_effort": "none"}, timeout=600)
        r.raise_for_status()
        body = r.json()
        sizes.append(body["usage"]["prompt_tokens"])
        conv.reply(body["choices"][0]["message"]["content"])
    return sizes


async def run(url: str, tok, chats: int, turns: int, target: int, reply: int) -> dict:
    async with httpx.AsyncClient(base_url=url, limits=httpx.Limits(max_connections=chats + 4)) \
            as client:
        before = (await client.get("/health")).json()["prefix_cache"]
        sizes = await asyncio.gather(*(one_chat(client, tok, turns, target, reply, i)
                                       for i in range(chats)))
        after = (await client.get("/health")).json()["prefix_cache"]
    d = {k: after[k] - before[k] for k in ("prefilled_tokens", "later_tokens", "warm_tokens",
                                            "warm_dropped", "boundaries_kept")}
    d["sent"] = sum(map(sum, sizes))
    # ideal: the first prompt, then each turn's growth less the reply the server produced
    d["ideal"] = sum(s[0] + sum(b - a - reply for a, b in zip(s, s[1:])) for s in sizes)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chats", default="1,8,32")
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--target", type=int, default=1200)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--demo", default="tiny")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    args = ap.parse_args()
    from server.model.tokenizer import Tokenizer
    tok = Tokenizer()
    print("| chats | turns | prompt tokens sent | prefilled before 1st token | ideal | "
          "after (later + warm) | warm dropped | boundaries kept |")
    print("|---|---|---|---|---|---|---|---|")
    for n in map(int, args.chats.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            env = {"RWKV_TASK_DB_PATH": str(Path(tmp) / "t.db"), "RWKV_STATE_CACHE_MB": "1024",
                   "RWKV_MAX_BATCH_SIZE": "64", "RWKV_LOG_LEVEL": "WARNING",
                   **dict(e.split("=", 1) for e in args.env)}
            proc, url = start_server(["--demo", args.demo], env, Path(tmp) / "server.log")
            try:
                d = asyncio.run(run(url, tok, n, args.turns, args.target, args.max_tokens))
            finally:
                proc.terminate()
                proc.wait(60)
        print(f"| {n} | {args.turns} | {d['sent']:,} | {d['prefilled_tokens']:,} | "
              f"{d['ideal']:,} | {d['later_tokens']:,} + {d['warm_tokens']:,} | "
              f"{d['warm_dropped']} | {d['boundaries_kept']} |", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    main()
