"""run.py with fast-forward disabled in-process (guide.FF_MIN = 10**9)."""
import runpy, sys
import server.scheduler.guide as guide
guide.FF_MIN = 10**9
sys.argv[0] = "run.py"
runpy.run_path("run.py", run_name="__main__")
