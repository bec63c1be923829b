#!/usr/bin/env python3
"""usage: mut.py ID FILE 'OLD' 'NEW' test files...  -- applies, runs, records, reverts"""
import sys, subprocess, os
mid, path, old, new, *tests = sys.argv[1:]
repo = "/tmp/mut52/repo"
p = os.path.join(repo, path)
src = open(p).read()
n = src.count(old)
if n != 1:
    print(f"{mid}: OLD found {n} times"); sys.exit(2)
line = src[:src.index(old)].count("\n") + 1
open(p, "w").write(src.replace(old, new))
diff = subprocess.run(["git", "diff", "-U0"], cwd=repo, capture_output=True, text=True).stdout
env = dict(os.environ, OMP_NUM_THREADS="1")
import time
t0 = time.time()
try:
    r = subprocess.run(["uv", "run", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", "-x", "--tb=line", "--timeout=120", *tests],
                       cwd=repo, capture_output=True, text=True, env=env, timeout=600)
except subprocess.TimeoutExpired as e:
    class R: pass
    r = R(); r.returncode = 124
    r.stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""); r.stderr = "TIMEOUT (600 s)"
el = time.time() - t0
subprocess.run(["git", "checkout", "--", "."], cwd=repo)
out = r.stdout + r.stderr
fails = [l for l in out.splitlines() if l.startswith("FAILED") or l.startswith("ERROR")]
status = ("TIMEOUT" if r.returncode == 124 else "CAUGHT") if r.returncode != 0 else "SURVIVED"
tail = out.strip().splitlines()[-1] if out.strip() else ""
rec = f"### {mid} {path}:{line} {status} ({el:.0f} s)\n{diff}\ntests: {' '.join(tests)}\n{chr(10).join(fails)}\n{tail}\n"
open(f"/tmp/mut52/logs/{mid}.txt", "w").write(rec + "\n---- output\n" + out[-6000:])
open("/tmp/mut52/results.md", "a").write(rec + "\n")
print(rec)
