import asyncio, httpx, sys, os, signal, time
port=int(sys.argv[1]); n=int(sys.argv[2]); mt=int(sys.argv[3]); pid=int(sys.argv[4]); out=sys.argv[5]
async def one(c,i):
    r=await c.post(f"http://localhost:{port}/v1/tasks/create", json={"prompt": f"User: number {i} tell\n\nAssistant:", "max_tokens": mt, "stream": False})
    tid=r.json()["task_id"]
    if mt>0:
        while True:
            g=await c.get(f"http://localhost:{port}/v1/tasks/{tid}/get_result")
            if g.json()["finished"]: break
            await asyncio.sleep(0.05)
    return tid, time.monotonic()
async def main():
    async with httpx.AsyncClient(timeout=300) as c:
        res=await asyncio.gather(*[one(c,i) for i in range(n)])
    await asyncio.sleep(float(sys.argv[6]) if len(sys.argv)>6 else 0)
    os.kill(pid, signal.SIGKILL)
    t=time.monotonic()
    print("killed", round(t-max(x[1] for x in res),4), "s after the last finished ack")
    open(out,'w').write("\n".join(x[0] for x in res)+"\n")
asyncio.run(main())
