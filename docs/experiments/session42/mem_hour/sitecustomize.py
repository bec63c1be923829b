"""Memory probe for the session-42 hour-long soak (run.sh). An experiment's probe, not the server's.

Loaded by a python started with this folder on PYTHONPATH (the venv's python, pyenv 3.11.7,
ships no sitecustomize, so this shadows none). Active only when MEM_LOG is set; it then removes
MEM_LOG from os.environ so that child processes do not start a second sampler.

Every MEM_EVERY_S (default 15) seconds a daemon thread appends one JSON line to $MEM_LOG:
wall time, VmRSS/RssAnon (kB, /proc/self/status), Threads, and glibc mallinfo2() (bytes:
arena, hblkhd, uordblks, fordblks, keepcost) with the time mallinfo2 took.
With MEM_TRIM_EVERY_S=N (N>0) a second daemon thread calls malloc_trim(0) every N seconds and
logs {"trim": ...}: its duration (time.perf_counter) and VmRSS just before and after.
"""
import ctypes
import json
import os
import threading
import time

_log = os.environ.pop("MEM_LOG", None)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]


def _status():
    d = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, v = line.split(":", 1)
            if k in ("VmRSS", "RssAnon", "Threads"):
                d[k] = int(v.split()[0])
    return d


if _log:
    _libc = ctypes.CDLL("libc.so.6", use_errno=True)
    _libc.mallinfo2.restype = _MallInfo2
    _libc.malloc_trim.argtypes = [ctypes.c_size_t]
    _libc.malloc_trim.restype = ctypes.c_int
    _lock = threading.Lock()
    _out = open(_log, "a", buffering=1)
    _t0 = time.time()

    def _write(rec):
        with _lock:
            _out.write(json.dumps(rec) + "\n")

    def _sampler(every):
        while True:
            rec = {"wall": round(time.time(), 2), "t": round(time.time() - _t0, 1), "pid": os.getpid()}
            try:
                rec.update(_status())
                p = time.perf_counter()
                mi = _libc.mallinfo2()
                rec["mallinfo_ms"] = round((time.perf_counter() - p) * 1e3, 3)
                for k in ("arena", "hblkhd", "uordblks", "fordblks", "keepcost"):
                    rec[k] = getattr(mi, k)
            except Exception as e:  # never let the probe die silently
                rec["err"] = repr(e)[:200]
            _write(rec)
            time.sleep(every)

    def _trimmer(every):
        while True:
            time.sleep(every)
            before = _status()["VmRSS"]
            p = time.perf_counter()
            r = _libc.malloc_trim(0)
            ms = (time.perf_counter() - p) * 1e3
            after = _status()["VmRSS"]
            _write({"trim": 1, "wall": round(time.time(), 2), "t": round(time.time() - _t0, 1),
                    "ms": round(ms, 3), "ret": r, "rss_before": before, "rss_after": after})

    threading.Thread(target=_sampler, args=(float(os.environ.get("MEM_EVERY_S", "15")),),
                     name="mem42-sampler", daemon=True).start()
    _trim = float(os.environ.get("MEM_TRIM_EVERY_S", "0") or 0)
    if _trim > 0:
        threading.Thread(target=_trimmer, args=(_trim,), name="mem42-trim", daemon=True).start()
