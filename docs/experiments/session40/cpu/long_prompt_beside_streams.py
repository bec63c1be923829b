"""A long prompt (about 4 x REPS tokens) sent beside NDEC decoding streams, then short requests
at +1, +3, +5, +7 s: when each got its first token. Against a server already running on port
8731 (`run.py --demo tiny --port 8731`, as in the .log). Written by session 40's QA helper.

    python long_prompt_beside_streams.py REPS NDEC
"""
import asyncio, httpx, time, json, sys
BASE="http://localhost:8731"
REPS=int(sys.argv[1]); NDEC=int(sys.argv[2])
import random; PFX="P%d"%random.randint(0,10**9)
long="one two three four " * REPS
T0=None
async def ttft(h, body, url="/v1/completions"):
    t0=time.time()
    async with h.stream("POST", BASE+url, json=body) as r:
        async for l in r.aiter_lines():
            if l.startswith("data:") and '"text":"' in l:
                return "sent at %.1f, first token at %.1f"%(t0-T0, time.time()-T0)
async def dec(h,i):
    async with h.stream("POST", BASE+"/v1/completions", json={"model":"rwkv-7","prompt":f"dec {i}","max_tokens":3000,"stream":True}) as r:
        async for l in r.aiter_lines(): pass
async def later(h, d, name):
    await asyncio.sleep(d)
    return name, await ttft(h, {"model":"rwkv-7","prompt":name,"max_tokens":5,"stream":True})
async def main():
    global T0
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=100)) as h:
        decs=[asyncio.create_task(dec(h,i)) for i in range(NDEC)]
        await asyncio.sleep(2)
        T0=time.time()
        jobs=[asyncio.create_task(ttft(h, {"model":"rwkv-7","prompt":PFX+" "+long,"max_tokens":5,"stream":True}))]
        jobs+= [asyncio.create_task(later(h, d, f"short{d}")) for d in (1,3,5,7)]
        for j in jobs: print(await j, flush=True)
        for d in decs: d.cancel()
asyncio.run(main())
