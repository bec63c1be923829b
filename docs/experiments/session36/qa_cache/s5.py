import sys, json
sys.path.insert(0, "/tmp/qa_cache")
from h import *
port = int(sys.argv[1])
found = []
for v in range(int(sys.argv[2]), int(sys.argv[3])):
    head = f"User: You are poet number {v}. Write about rivers, with care and feeling.\n\nAssistant: OK.\n\n"
    q = f"User: a poem about snow {v}\n\nAssistant:"
    r, t0 = task(port, "create", {"prompt": head, "max_tokens": 0})
    tpl = C.post(f"http://localhost:{port}/v1/tasks/{t0}/as_template").json()["task_id"]
    samp = {"max_tokens": 150, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "seed": v}
    r2, _ = task(port, f"{tpl}/fork?tmp=true", {"prompt": q, **samp})
    r1, _ = task(port, "tmp", {"prompt": head + q, **samp})
    r3, _ = task(port, f"{tpl}/fork?tmp=true", {"prompt": q, **samp})
    if not (r1 == r2 == r3):
        found.append(v); print("DIFF v", v, r1 == r2, r1 == r3, r2 == r3, flush=True)
print("found", found)
