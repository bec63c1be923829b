import time, threading, sys
sys.path.insert(0, "/tmp/qa_review/repo")
from server.api.response_format import response_grammar
s = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": "[a-z]{3}[0-9]+"} for i in range(9000)}}
fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}
done = False
def work():
    global done
    t = time.time(); response_grammar(fmt, ">"); print(f"compile {time.time()-t:.2f}s in a thread"); done = True
th = threading.Thread(target=work); th.start()
gaps = []; last = time.time()
while not done:
    time.sleep(0.005); now = time.time(); gaps.append(now - last); last = now
print(f"main thread's longest gap while the thread compiled: {max(gaps)*1e3:.0f} ms")
