"""The same EACCES case on 37c7e3b's verify (run with PYTHONPATH=/tmp/qa43/review2/old)."""
import os, locale, gettext, zipfile
from server.model import verify
W = "/tmp/qa43/review2/eacces"
if os.fork() == 0:
    os.setgid(65534); os.setuid(65534)
    print("old verify returned", verify.main([W + "/secret/x.pth"])); os._exit(0)
os.wait()
