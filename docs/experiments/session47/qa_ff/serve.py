"""run.py with fast-forward optionally off (FF_OFF=1)."""
import os, sys, runpy
sys.path.insert(0, "/tmp/qa_ff/repo"); os.chdir("/tmp/qa_ff/repo")
if os.environ.get("FF_OFF"):
    import server.scheduler.guide as guide
    guide.FF_MIN = 10**9
sys.argv = ["run.py"] + sys.argv[1:]
runpy.run_path("run.py", run_name="__main__")
