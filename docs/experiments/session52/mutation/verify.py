"""usage: verify.py ID pytest-args...: runs the args on the clean verify clone, then with mutant ID"""
import sys, subprocess, os
sys.path.insert(0, "/tmp/mut52")
import mutants
ALL = {m[0]: m for m in mutants.M}
# dropped ones too
import re
mid, *args = sys.argv[1:]
repo = "/tmp/mut52/verify"
m = ALL[mid]
env = dict(os.environ, OMP_NUM_THREADS="1")
cmd = ["uv", "run", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", "--tb=short", "--timeout=120", *args]
r0 = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env)
p = os.path.join(repo, m[1]); src = open(p).read(); assert src.count(m[2]) == 1
open(p, "w").write(src.replace(m[2], m[3]))
try:
    r1 = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env)
finally:
    open(p, "w").write(src)
print(f"{mid} clean rc={r0.returncode}: {r0.stdout.strip().splitlines()[-1]}")
print(f"{mid} mutant rc={r1.returncode}: {r1.stdout.strip().splitlines()[-1]}")
for l in (r1.stdout).splitlines():
    if l.startswith("E ") : print("   ", l[:200])
if r0.returncode: print(r0.stdout[-3000:])
