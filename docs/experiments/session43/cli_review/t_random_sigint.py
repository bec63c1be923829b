"""SIGINT server.model.random the moment its .part file appears: OUT absent, .part removed."""
import os, signal, subprocess, time, shutil, sys
W = "/tmp/qa43/review2/rnd4"; shutil.rmtree(W, ignore_errors=True); os.makedirs(W)
for delay in (0.0, 0.5, 1.0):
    out = f"{W}/big{delay}.pth"
    p = subprocess.Popen([".venv/bin/python", "-m", "server.model.random", out, "--preset", "0.4b",
                          "--dtype", "fp32"], env=dict(os.environ, PYTHONPATH="."),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while not any(n.endswith(".part") for n in os.listdir(W)):
        time.sleep(0.01)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    o, _ = p.communicate()
    print(f"delay {delay}: rc={p.returncode} tail={o.strip().splitlines()[-1][:120]!r} dir={os.listdir(W)}")
    for n in os.listdir(W): os.unlink(f"{W}/{n}")
