# Many clients hitting the same tasks with stream/stop/continue/fork/delete/as_template/get_result.
import asyncio, httpx, random, json, sys, time, collections
B="http://localhost:8791/v1/tasks"
codes=collections.Counter(); bad=[]; deleted=set(); created=set(); tmpls=set()
async def op(c, ids):
    tid=random.choice(ids); k=random.choices(["stream","stop","cont","fork","del","tpl","res","status","export"],[5,4,6,3,0.5,1,3,2,1])[0]
    try:
        if k=="stream":
            async with c.stream("GET",f"{B}/{tid}/stream",timeout=60) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: ") and line[6:]!="[DONE]":
                        json.loads(line[6:])
                code=r.status_code
        elif k=="stop": code=(r:=await c.post(f"{B}/{tid}/stop")).status_code
        elif k=="cont": code=(r:=await c.post(f"{B}/{tid}/continue",json={"prompt":" x","max_tokens":random.choice([0,3,30])})).status_code
        elif k=="fork":
            r=await c.post(f"{B}/{tid}/fork",json={"max_tokens":random.choice([0,5])}); code=r.status_code
            if code==200: created.add(r.json()["task_id"]); ids.append(r.json()["task_id"])
        elif k=="del":
            r=await c.post(f"{B}/{tid}/delete?force=true"); code=r.status_code
            if code==200: deleted.add(tid)
        elif k=="tpl":
            r=await c.post(f"{B}/{tid}/as_template"); code=r.status_code
            if code==200: tmpls.add(r.json()["task_id"]); ids.append(r.json()["task_id"])
        elif k=="res": code=(r:=await c.get(f"{B}/{tid}/get_result")).status_code
        elif k=="status": code=(r:=await c.get(f"{B}/{tid}/status")).status_code
        elif k=="export": code=(r:=await c.get(f"{B}/{tid}/export_state")).status_code
        codes[(k,code)]+=1
        if code>=500: bad.append((k,tid,code,r.text[:200]))
    except Exception as e:
        bad.append((k,tid,repr(e)))
async def client(ids, n):
    async with httpx.AsyncClient(timeout=60) as c:
        for _ in range(n): await op(c, ids)
async def main():
    random.seed(int(sys.argv[1]) if len(sys.argv)>1 else 0)
    async with httpx.AsyncClient(timeout=60) as c:
        ids=[]
        for _ in range(4):
            r=await c.post(B+"/create",json={"prompt":"Hello","max_tokens":20}); ids.append(r.json()["task_id"]); created.add(ids[-1])
    t0=time.time()
    await asyncio.wait_for(asyncio.gather(*[client(ids, 40) for _ in range(24)]), 300)
    print("elapsed", round(time.time()-t0,1)); print(sorted(codes.items())); print("BAD", bad[:10])
    await asyncio.sleep(2)
    async with httpx.AsyncClient(timeout=60) as c:
        lst=(await c.get(B+"/list?limit=10000")).json()
        back=[d for d in deleted if d in lst["cpu_tasks"] or d in lst["db_tasks"]]
        print("deleted but listed:", back)
        for d in deleted:
            r=await c.get(f"{B}/{d}/status")
            if r.status_code!=404: print("deleted but served", d, r.status_code, r.text[:100])
        busy=[]
        for t in lst["cpu_tasks"]:
            r=await c.get(f"{B}/{t}/status")
            if r.status_code==200 and r.json()["status"]!=3: busy.append((t,r.json()))
        print("not finished after settle:", busy[:5])
    json.dump({"deleted":sorted(deleted),"created":sorted(created),"tmpls":sorted(tmpls)},open("/tmp/rev_task/review/chaos1_ids.json","w"))
asyncio.run(main())
