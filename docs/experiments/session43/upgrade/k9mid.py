"""k9mid.py URL STATEFILE PIDFILE OUT.json -- concurrent durable imports + persistent creates; kill -9 the server mid-way"""
import httpx, threading, time, json, sys, os, signal, random
url, sf, pidf, out = sys.argv[1:]
data = open(sf, 'rb').read(); pid = int(open(pidf).read())
acked_imp, acked_create, finished = [], [], []
stop = False
def imp(k):
    c = httpx.Client(base_url=url, timeout=30); i = 0
    while not stop:
        try:
            r = c.post(f'/v1/tasks/import_state?name=mid{k}_{i}', content=data)
            if r.status_code == 200: acked_imp.append(r.json()['task_id'])
        except Exception: return
        i += 1
def cre(k):
    c = httpx.Client(base_url=url, timeout=30); i = 0
    while not stop:
        try:
            r = c.post('/v1/tasks/create', json={'prompt': f'User: hi {k} {i}\n\nAssistant:', 'max_tokens': 2, 'temperature': 0})
            if r.status_code == 200:
                tid = r.json()['task_id']; acked_create.append(tid)
                for _ in range(100):
                    j = c.get(f'/v1/tasks/{tid}/get_result').json()
                    if j.get('finished'): finished.append(tid); break
                    time.sleep(0.02)
        except Exception: return
        i += 1
ts = [threading.Thread(target=imp, args=(k,)) for k in range(3)] + [threading.Thread(target=cre, args=(k,)) for k in range(3)]
for t in ts: t.start()
time.sleep(float(os.environ.get('K9_AFTER', '4')) + random.random())
os.kill(pid, signal.SIGKILL); t_kill = time.time()
stop = True
for t in ts: t.join()
json.dump({'imports': acked_imp, 'creates': acked_create, 'finished': finished}, open(out, 'w'))
print(f'killed; acked imports {len(acked_imp)}, creates acked {len(acked_create)}, finished {len(finished)}')
