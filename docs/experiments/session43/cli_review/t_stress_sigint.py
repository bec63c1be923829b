"""SIGINT server.bench.stress (tiny, CPU) once the progress bar shows (default mode), and in
--arrivals-per-s mode while tasks are still arriving: exit status and output tail."""
import os, signal, subprocess, sys, time
env = dict(os.environ, PYTHONPATH=".", OMP_NUM_THREADS="1", RWKV_TASK_DB_PATH=":memory:")
def go(label, extra, wait_for, delay):
    p = subprocess.Popen([".venv/bin/python", "-m", "server.bench.stress", "--tasks", "64",
                          "--max-tokens", "400", "--device", "cpu"] + extra, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    buf = b""; t = time.time()
    os.set_blocking(p.stdout.fileno(), False)
    while wait_for.encode() not in buf and time.time() - t < 240 and p.poll() is None:
        time.sleep(0.2); buf += p.stdout.read() or b""
    time.sleep(delay); t1 = time.time()
    p.send_signal(signal.SIGINT)
    os.set_blocking(p.stdout.fileno(), True)
    rest = p.stdout.read(); p.wait()
    tail = (buf + rest).decode(errors="replace").replace("\r", "\n").strip().splitlines()
    print(f"== {label}: rc={p.returncode} in {time.time()-t1:.1f}s after SIGINT")
    print("\n".join(tail[-8:]))
go("default mode, after progress shows", [], "tok/s", 1.0)
go("arrivals mode (1 task/s), during arrivals", ["--arrivals-per-s", "1"], "tok/s", 2.0)
