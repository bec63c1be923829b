"""A failing grammar row beside normal and constrained rows in the same pulses: do the others finish?"""
import asyncio, httpx
B = "http://localhost:8792"
async def main():
    async with httpx.AsyncClient(base_url=B, timeout=60) as c:
        good = [c.post("/v1/completions", json={"prompt": "x", "max_tokens": 40, "seed": i}) for i in range(4)]
        goodc = [c.post("/v1/completions", json={"prompt": "x", "max_tokens": 40, "seed": i, "response_format": {"type": "json_object"}}) for i in range(3)]
        bad = [c.post("/v1/completions", json={"prompt": "x", "max_tokens": 40, "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": s}}})
               for s in ({"$ref": "#"}, {"type": "object", "properties": {"a": {"type": "string", "pattern": "(.{0,10}){100}"}}, "required": ["a"]})]
        rs = await asyncio.gather(*good, *goodc, *bad)
        print([(r.status_code, r.json()["choices"][0]["finish_reason"] if r.status_code == 200 else r.json()["error"]["code"]) for r in rs])
asyncio.run(main())
