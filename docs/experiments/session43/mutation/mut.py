#!/usr/bin/env python3
"""usage: mut.py ID FILE 'OLD' 'NEW' test files...  -- applies, runs, records, reverts"""
import sys, subprocess, os
mid, path, old, new, *tests = sys.argv[1:]
repo = "/tmp/qa43/mut/repo"
p = os.path.join(repo, path)
src = open(p).read()
n = src.count(old)
if n != 1:
    print(f"{mid}: OLD found {n} times"); sys.exit(2)
line = src[:src.index(old)].count("\n") + 1
open(p, "w").write(src.replace(old, new))
diff = subprocess.run(["git", "diff", "-U0"], cwd=repo, capture_output=True, text=True).stdout
env = dict(os.environ, OMP_NUM_THREADS="1")
r = subprocess.run(["uv", "run", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", "-x", "--tb=line", *tests],
                   cwd=repo, capture_output=True, text=True, env=env, timeout=1500)
subprocess.run(["git", "checkout", "--", "."], cwd=repo)
out = r.stdout + r.stderr
fails = [l for l in out.splitlines() if l.startswith("FAILED") or l.startswith("ERROR")]
status = "CAUGHT" if r.returncode != 0 else "SURVIVED"
tail = out.strip().splitlines()[-1] if out.strip() else ""
rec = f"### {mid} {path}:{line} {status}\n{diff}\ntests: {' '.join(tests)}\n{chr(10).join(fails)}\n{tail}\n"
open(f"/tmp/qa43/mut/logs/{mid}.txt", "w").write(rec + "\n---- output\n" + out[-6000:])
open("/tmp/qa43/mut/results.md", "a").write(rec + "\n")
print(rec)
