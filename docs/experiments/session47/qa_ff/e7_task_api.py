"""Task API: create (response_format json_schema) -> stream/get_result -> continue -> fork, on the
FF-on server (8795) and the FF-off one (8796). Everything must be the same."""
import json, time, requests
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["ok", "n", "tag", "city"],
          "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 2, 3]},
                         "tag": {"type": "string", "maxLength": 3},
                         "city": {"enum": ["Paris is a lovely city", "London"]}}}
RF = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}

def post(port, path, body):
    r = requests.post(f"http://localhost:{port}/v1/tasks{path}", json=body, timeout=120)
    assert r.status_code in (200, 201), (r.status_code, r.text)
    return r.json()

def wait(port, tid):
    while True:
        s = requests.get(f"http://localhost:{port}/v1/tasks/{tid}/status").json()
        if s["status"] == 3: return s
        time.sleep(0.05)

def sse(port, tid, pos=0):
    r = requests.get(f"http://localhost:{port}/v1/tasks/{tid}/stream", params={"pos": pos}, stream=True, timeout=120)
    text = ""
    for l in r.iter_lines(decode_unicode=True):
        if l.startswith("data: ") and l != "data: [DONE]":
            e = json.loads(l[6:]); text += e.get("data", "")
            if "error" in e: text += "<ERR " + json.dumps(e) + ">"
    return text

def flow(port):
    out = {}
    t = post(port, "/create", dict(prompt="User: weather?\n\nAssistant:", max_tokens=60, seed=11, temperature=1.0,
                                   top_p=1.0, top_k=0, presence_penalty=0.6, penalty_decay=0.95, response_format=RF))
    tid = t["task_id"]
    out["stream0"] = sse(port, tid, 0)
    wait(port, tid)
    out["r1"] = requests.get(f"http://localhost:{port}/v1/tasks/{tid}/get_result").json()["result"]
    out["stream5"] = sse(port, tid, 5)
    out["gen1"] = requests.get(f"http://localhost:{port}/v1/tasks/{tid}/status").json()["generated_buf"]
    post(port, f"/{tid}/continue", dict(prompt="\n\nUser: again\n\nAssistant:", max_tokens=30, response_format=RF))
    wait(port, tid)
    out["r2"] = requests.get(f"http://localhost:{port}/v1/tasks/{tid}/get_result").json()["result"]
    f = post(port, f"/{tid}/fork", dict(prompt="\n\nUser: more\n\nAssistant:", max_tokens=20))
    wait(port, f["task_id"])
    out["fork"] = requests.get(f"http://localhost:{port}/v1/tasks/{f['task_id']}/get_result").json()["result"]
    return out

a, b = flow(8795), flow(8796)
for k in a:
    print(k, "same" if a[k] == b[k] else "DIFFERENT", repr(a[k])[:150], "" if a[k] == b[k] else "| off: " + repr(b[k])[:150])
