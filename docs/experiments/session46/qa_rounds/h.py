"""QA helpers for /tmp/qa46c (server at :8794)."""
import json, time, httpx

BASE = "http://127.0.0.1:8794"
C = httpx.Client(base_url=BASE, timeout=120)

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 10},
                         "n": {"type": "integer", "minimum": 0, "maximum": 99},
                         "ok": {"type": "boolean"}},
          "required": ["name", "n", "ok"], "additionalProperties": False}
RF = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
RF_OBJ = {"type": "json_object"}


def check_schema(obj):
    """True if obj matches SCHEMA."""
    return (isinstance(obj, dict) and set(obj) == {"name", "n", "ok"}
            and isinstance(obj["name"], str) and len(obj["name"]) <= 10
            and isinstance(obj["n"], int) and not isinstance(obj["n"], bool)
            and 0 <= obj["n"] <= 99 and isinstance(obj["ok"], bool))


def parse_json(text):
    """(ok, obj_or_error, leadinfo). Leading blank allowed: at most one space or newline."""
    lead = ""
    t = text
    if t[:1] in (" ", "\n"):
        lead, t = t[0], t[1:]
    try:
        return True, json.loads(t), repr(lead)
    except Exception as e:
        return False, f"{type(e).__name__}: {e}", repr(lead)


def post(path, body=None, **kw):
    r = C.post(path, json=body, **kw)
    try:
        j = r.json()
    except Exception:
        j = r.text
    return r.status_code, j


def get(path):
    r = C.get(path)
    try:
        return r.status_code, r.json()
    except Exception:
        return r.status_code, r.text


def wait(tid, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        s, j = get(f"/v1/tasks/{tid}/get_result")
        if s != 200:
            return s, j
        if j["finished"]:
            return s, j
        time.sleep(0.1)
    return 0, "TIMEOUT"


def sse(path, body, method="POST"):
    """Return list of raw data lines from an SSE."""
    out = []
    with C.stream(method, path, json=body) as r:
        if r.status_code != 200:
            return r.status_code, r.read().decode()
        for line in r.iter_lines():
            if line.startswith("data:"):
                out.append(line[5:].strip())
            elif line.strip():
                out.append("#" + line)
    return 200, out


def log(f, *a):
    s = " ".join(str(x) for x in a)
    print(s)
    f.write(s + "\n")
    f.flush()
