"""Long stop strings: does scanning them stall the event loop (other clients' latency)?"""
import asyncio, time, httpx, sys
B = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8792"
async def probe(c, stop_at, lat):
    while time.time() < stop_at:
        t = time.time(); await c.get("/health"); lat.append(time.time() - t); await asyncio.sleep(0.05)
async def main():
    async with httpx.AsyncClient(base_url=B, timeout=120) as c:
        for label, stops in (("none", None), ("16x480KB", ["ab" * 240000 + str(i) for i in range(16)])):
            lat = []; t0 = time.time()
            p = asyncio.create_task(probe(c, time.time() + 1e9, lat))
            reqs = [c.post("/v1/completions", json={"prompt": "x", "max_tokens": 200, "stream": s, "stop": stops, "n": 4, "echo": True}) for s in (True, False)]
            rs = await asyncio.gather(*reqs)
            p.cancel()
            print(label, [r.status_code for r in rs], f"wall {time.time()-t0:.1f}s; /health max {max(lat)*1000:.0f} ms, median {sorted(lat)[len(lat)//2]*1000:.0f} ms, n={len(lat)}")
asyncio.run(main())
