"""Loaded by every python3 started with this folder first on PYTHONPATH (gc_ab.sh): logs each
garbage collection (end time, generation, duration, thread) to $GC_LOG_DIR/gc-<pid>.tsv, and
sets the generation-0 threshold to $GC0 when given. An experiment's probe, not the server's."""
import gc
import os
import sys
import threading
import time

_dir = os.environ.get("GC_LOG_DIR")
if os.environ.get("GC0"):
    gc.set_threshold(int(os.environ["GC0"]), *gc.get_threshold()[1:])
if _dir:
    _out = open(os.path.join(_dir, f"gc-{os.getpid()}.tsv"), "w", buffering=1)
    _out.write(f"# cache_mb={os.environ.get('RWKV_STATE_CACHE_MB')} " + " ".join(sys.argv) + "\n")
    _start = {}

    def _cb(phase, info):
        now = time.perf_counter()
        if phase == "start":
            _start[threading.get_ident()] = now
            return
        t0 = _start.pop(threading.get_ident(), now)
        _out.write(f"{time.time():.6f}\t{info['generation']}\t{(now - t0) * 1e3:.4f}\t"
                   f"{threading.current_thread().name}\n")

    gc.callbacks.append(_cb)
