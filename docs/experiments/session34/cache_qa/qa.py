import httpx, json, time, sys
import os
A = os.environ.get("QA_A", "http://localhost:18961"); B = "http://localhost:18962"
ca = httpx.Client(base_url=A, timeout=90); cb = httpx.Client(base_url=B, timeout=90)
stats = {"compared": 0, "diff": 0, "err": 0}
findings = []
def strip(j):
    if isinstance(j, dict):
        return {k: strip(v) for k, v in j.items() if k not in ("id", "created", "system_fingerprint", "prefill_time", "gen_time", "speed", "task_id", "usage_detail", "timings", "model")}
    if isinstance(j, list): return [strip(x) for x in j]
    return j
def both(method, path_a, path_b=None, body=None, label="", key=None):
    path_b = path_b or path_a
    out = []
    for c, p in ((ca, path_a), (cb, path_b)):
        t = time.time()
        try:
            r = c.request(method, p, json=body)
        except Exception as e:
            stats["err"] += 1; findings.append(f"{label}: exception {e!r} on {c.base_url}{p}"); out.append(None); continue
        dt = time.time() - t
        if dt > 60: findings.append(f"{label}: slow {dt:.1f}s")
        if r.status_code >= 500 or r.status_code >= 400:
            stats["err"] += 1; findings.append(f"{label}: HTTP {r.status_code} {r.text[:300]} on {c.base_url}{p}")
        try: out.append(r.json())
        except Exception: out.append(r.text)
    return out
def cmp(label, ja, jb, req=None):
    stats["compared"] += 1
    sa, sb = strip(ja), strip(jb)
    # ignore usage cached tokens details
    for s in (sa, sb):
        if isinstance(s, dict) and "usage" in s and isinstance(s["usage"], dict):
            s["usage"] = {k: v for k, v in s["usage"].items() if k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    if sa != sb:
        stats["diff"] += 1
        findings.append(f"DIFF {label}\n  req={json.dumps(req)[:600]}\n  ON ={json.dumps(sa)[:800]}\n  OFF={json.dumps(sb)[:800]}")
        print("DIFF", label, flush=True)
        return False
    return True
def msg_of(j, i=0):
    m = j["choices"][i]["message"]
    return m
def chat(label, body):
    ja, jb = both("POST", "/v1/chat/completions", body=body, label=label)
    cmp(label, ja, jb, body)
    return ja, jb
