import httpx
B = "http://localhost:8791/v1/tasks"; c = httpx.Client(timeout=60)
allids = c.get(B + "/list?order=id&limit=10000").json()["db_tasks"]
pages, after = [], None
while True:
    q = f"{B}/list?order=id&limit=7" + (f"&after={after}" if after else "")
    d = c.get(q).json()["db_tasks"]
    if not d: break
    pages += d; after = d[-1]
print("after-paging == id order:", pages == allids, len(pages))
rec = c.get(B + "/list?limit=10000").json()["db_tasks"]
off = []
for o in range(0, len(rec), 9): off += c.get(f"{B}/list?limit=9&offset={o}").json()["db_tasks"]
print("offset paging == recent order:", off == rec, "| same set:", set(rec) == set(allids))
print(c.get(B + "/list?after=~&limit=3").json()["db_tasks"], c.get(B + "/list?offset=100000").json()["db_tasks"])
print(len(allids), [x for x in allids if x not in pages][:5], [i for i,(a,b) in enumerate(zip(pages, allids)) if a!=b][:3])
print(allids[:5], pages[:5])
