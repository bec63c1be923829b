"""Wall and thread CPU time of each `encode` the chat route makes, in http_stages' in-process
server (tiny model) driven by the chat bench.

    PYTHONPATH=<tree> python docs/experiments/session40/cpu/encode_in_server.py
"""
import sys, time
import server.bench.http_stages as hs
import server.api.routes.openai as routes
real = routes.encode
log = []
async def encode(loader, text):
    w, c = time.perf_counter(), time.thread_time()
    out = await real(loader, text)
    log.append((len(text), (time.perf_counter() - w) * 1e6, (time.thread_time() - c) * 1e6))
    return out
routes.encode = encode
hs.main(sys.argv[1:])
for x in log: print("encode chars %d wall %.0f us cpu %.0f us" % x)
