"""As uid 65534: verify / random given a path under a directory it cannot search (mode 700,
root's): Path.exists()/is_dir() raise PermissionError in Python 3.11 (os.path.exists does not)."""
import os, shutil, sys, traceback
W = "/tmp/qa43/review2/eacces"; shutil.rmtree(W, ignore_errors=True); os.makedirs(W + "/secret")
os.chmod(W + "/secret", 0o700)
from server.model import verify, random as R
if os.fork() == 0:
    os.setgid(65534); os.setuid(65534)
    for label, fn in (("verify", lambda: verify.main([W + "/secret/x.pth"])),
                      ("random", lambda: R.main([W + "/secret/x.pth", "--preset", "tiny"]))):
        try:
            print(label, "returned", fn())
        except SystemExit as e:
            print(label, "SystemExit:", e)
        except BaseException as e:
            print(label, "TRACEBACK:", type(e).__name__, e)
            traceback.print_exc(limit=-2)
    os._exit(0)
os.wait()
