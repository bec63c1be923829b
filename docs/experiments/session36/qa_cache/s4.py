import sys, json, hashlib
sys.path.insert(0, "/tmp/qa_cache")
from h import *
def exp(port, tid):
    r = C.get(f"http://localhost:{port}/v1/tasks/{tid}/export_state")
    if r.status_code != 200: return ("ERR", r.status_code)
    import struct; n = struct.unpack("<Q", r.content[:8])[0]
    return hashlib.sha1(r.content[8+n:]).hexdigest()[:12]
port = int(sys.argv[1]); tag = sys.argv[2]
head = f"User: You are a poet {tag}. Write about rivers and mountains and the sea, in many words, with care.\n\nAssistant: OK.\n\n"
q = "User: a poem about snow please\n\nAssistant:"
r, t0 = task(port, "create", {"prompt": head, "max_tokens": 0})
tpl = C.post(f"http://localhost:{port}/v1/tasks/{t0}/as_template").json()["task_id"]
print("head tokens", len(C.post(f"http://localhost:{port}/v1/completions", json={"prompt": head, "max_tokens": 1}).json()["usage"]["prompt_tokens"].__str__()))
# fresh full prompt, prefill only (persistent) then with generation
r, full0 = task(port, "create", {"prompt": head + q, "max_tokens": 0})
r, fork0 = task(port, f"{tpl}/fork", {"prompt": q, "max_tokens": 0})
print("prefill-only: fresh", exp(port, full0), "fork", exp(port, fork0))
r1, full1 = task(port, "create", {"prompt": head + q, "max_tokens": 40, "temperature": 0})
r2, fork1 = task(port, f"{tpl}/fork", {"prompt": q, "max_tokens": 40, "temperature": 0})
print("gen: fresh", exp(port, full1), "fork", exp(port, fork1), "texts equal", r1 == r2)
print(json.dumps([r1, r2], ensure_ascii=False)[:300])
