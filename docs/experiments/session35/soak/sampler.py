"""Sample server resources every INTERVAL s into a CSV. usage: sampler.py PID OUT.csv INTERVAL DURATION"""
import csv, os, sys, time, json, subprocess
import httpx

PID, OUT, INTERVAL, DURATION = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
BASE = "http://127.0.0.1:8792"
DB = os.environ.get("SOAK_DB", "/tmp/soak35/t.db")

def proc(pid):
    d = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads", "VmSize"):
                d[k] = int(v.split()[0])
    d["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    socks = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                socks += 1
        except OSError:
            pass
    d["socks"] = socks
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Anonymous", "Rss", "Private_Dirty"):
                d["roll_" + k] = int(v.split()[0])
    heap = 0; cur = None; anon_maps = 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" not in parts[0]:
                cur = parts[5] if len(parts) > 5 else ""
                if cur == "": anon_maps += 1
            elif parts[0] == "Rss:" and cur == "[heap]":
                heap += int(parts[1])
    d["heap_kb"] = heap; d["anon_maps"] = anon_maps
    return d

def sz(p):
    try:
        return os.path.getsize(p)
    except OSError:
        return -1

def tcp_states():
    out = subprocess.run(["ss", "-tanH", "sport = :8792"], capture_output=True, text=True).stdout
    st = {}
    for line in out.splitlines():
        s = line.split()[0]
        st[s] = st.get(s, 0) + 1
    return st

METRICS = ["rwkv_queue_length", "rwkv_capacity", "rwkv_active_slots", "rwkv_generated_tokens_total",
           "rwkv_prefix_cache_entries", "rwkv_prefix_cache_bytes", "rwkv_prefix_cache_evictions_total"]

fields = ["t", "wall", "rss_kb", "anon_kb", "heap_kb", "anon_maps", "hwm_kb", "vmsize_kb", "threads", "fds", "socks", "tcp_estab", "tcp_closewait",
          "tcp_timewait", "db", "wal", "health_status", "capacity", "active", "queue", "finishing",
          "unsaved", "cache_entries", "cache_bytes", "cache_evictions", "list_cpu", "list_db", "list_total",
          "metric_lines", "metric_bytes", "req_total", "req_5xx", "gen_tokens", "probe_s", "probe_status",
          "health_s"]

def sample(c, t0):
    r = {"t": round(time.time() - t0, 1), "wall": time.strftime("%H:%M:%S")}
    p = proc(PID)
    r.update(anon_kb=p.get("roll_Anonymous"), heap_kb=p["heap_kb"], anon_maps=p["anon_maps"], rss_kb=p["VmRSS"], hwm_kb=p["VmHWM"], vmsize_kb=p["VmSize"], threads=p["Threads"], fds=p["fds"], socks=p["socks"])
    st = tcp_states()
    r.update(tcp_estab=st.get("ESTAB", 0), tcp_closewait=st.get("CLOSE-WAIT", 0), tcp_timewait=st.get("TIME-WAIT", 0))
    r.update(db=sz(DB), wal=sz(DB + "-wal"))
    try:
        t = time.time()
        h = c.get(BASE + "/health", timeout=30).json()
        r["health_s"] = round(time.time() - t, 3)
        pc = h.get("prefix_cache", {})
        r.update(health_status=h.get("status"), capacity=h.get("capacity"), active=h.get("active"), queue=h.get("queue"),
                 finishing=h.get("finishing"), unsaved=h.get("task_store", {}).get("unsaved"),
                 cache_entries=pc.get("entries"), cache_bytes=pc.get("bytes"), cache_evictions=pc.get("evictions"))
    except Exception as e:
        r["health_status"] = f"ERR {e!r}"
    try:
        l = c.get(BASE + "/v1/tasks/list", params={"limit": 1}, timeout=30).json()
        r.update(list_cpu=l.get("cpu_cache_count"), list_db=l.get("database_count"), list_total=l.get("total_count"))
    except Exception as e:
        r["list_cpu"] = f"ERR {e!r}"
    try:
        m = c.get(BASE + "/metrics", timeout=30).text
        lines = [x for x in m.splitlines() if x and not x.startswith("#")]
        r["metric_lines"] = len(lines)
        r["metric_bytes"] = len(m)
        tot = f5 = 0
        for x in lines:
            if x.startswith("rwkv_http_requests_total{"):
                v = float(x.rsplit(" ", 1)[1]); tot += v
                if 'status="5' in x:
                    f5 += v
        r["req_total"], r["req_5xx"] = int(tot), int(f5)
        for x in lines:
            if x.startswith("rwkv_generated_tokens_total "):
                r["gen_tokens"] = int(float(x.split()[1]))
    except Exception as e:
        r["metric_lines"] = f"ERR {e!r}"
    try:
        t = time.time()
        pr = c.post(BASE + "/v1/chat/completions", timeout=120, json={
            "model": "rwkv-7", "max_tokens": 8, "temperature": 0, "reasoning_effort": "none",
            "messages": [{"role": "user", "content": "probe: say hi"}]})
        r["probe_s"] = round(time.time() - t, 3)
        r["probe_status"] = pr.status_code
    except Exception as e:
        r["probe_status"] = f"ERR {e!r}"
    return r

def main():
    t0 = time.time()
    new = not os.path.exists(OUT)
    with httpx.Client() as c, open(OUT, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            w.writeheader()
        while True:
            ts = time.time()
            r = sample(c, t0)
            w.writerow(r); f.flush()
            print(json.dumps(r), flush=True)
            if time.time() - t0 >= DURATION:
                break
            time.sleep(max(0, INTERVAL - (time.time() - ts)))

main()
