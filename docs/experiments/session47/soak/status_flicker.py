"""Poll /status of constrained tasks (schema 'fixed': long forced runs) as fast as possible and
record any status going back to 0/1 after 2. usage: python status_flicker.py URL N_TASKS CONC"""
import asyncio
import json
import sys

import httpx

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from common import rf_schema

URL, N, CONC = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
BODY = {"prompt": "User: give JSON\n\nAssistant:", "max_tokens": 40, "response_format": rf_schema("fixed"),
        "temperature": 1}
bad, polls, seqs = [], 0, []


async def one(cl, i):
    global polls
    r = await cl.post(URL + "/v1/tasks/tmp", json=dict(BODY, seed=i))
    tid = r.json()["task_id"]
    seq = []
    while True:
        s = (await cl.get(f"{URL}/v1/tasks/{tid}/status")).json()
        polls += 1
        if not seq or seq[-1] != s["status"]:
            seq.append(s["status"])
        if s["status"] == 3:
            break
    seqs.append(seq)
    if 2 in seq and any(x in (0, 1) for x in seq[seq.index(2):]):
        bad.append({"seed": i, "seq": seq, "tid": tid})


async def main():
    async with httpx.AsyncClient(timeout=120) as cl:
        for k in range(0, N, CONC):
            await asyncio.gather(*[one(cl, i) for i in range(k, min(N, k + CONC))])
    print(json.dumps({"tasks": N, "polls": polls, "went_back": len(bad), "examples": bad[:5],
                      "seq_kinds": {str(k): sum(1 for s in seqs if s == list(k)) for k in {tuple(s) for s in seqs}}}))


asyncio.run(main())
