"""As uid 65534 (setuid after imports): server.model.random into an unwritable dir, and
--force onto a writable OUT in an unwritable dir; then SIGINT-like KeyboardInterrupt cleanup."""
import os, sys, shutil, subprocess
W = "/tmp/qa43/review2/rnd3"; shutil.rmtree(W, ignore_errors=True); os.makedirs(W + "/ro")
from server.model import random as R
R.main([W + "/seed.pth", "--preset", "tiny"])
shutil.copy(W + "/seed.pth", W + "/ro/w.pth"); os.chmod(W + "/ro/w.pth", 0o666)
os.chmod(W + "/ro", 0o755)
pid = os.fork()
if pid == 0:
    os.setgid(65534); os.setuid(65534)
    for argv in ([W + "/ro/x.pth", "--preset", "tiny"], [W + "/ro/w.pth", "--preset", "tiny", "--force"]):
        try:
            R.main(argv)
        except SystemExit as e:
            print("argv", argv[0], "->", e)
    os._exit(0)
os.waitpid(pid, 0)
print(sorted(os.listdir(W + "/ro")))
