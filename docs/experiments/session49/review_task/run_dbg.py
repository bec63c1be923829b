import faulthandler, signal, sys, runpy
sys.path.insert(0, "/tmp/rev_task")
faulthandler.register(signal.SIGUSR1, all_threads=True, file=open("/tmp/rev_task/review/stacks.txt", "a"))
sys.argv = ["run.py"] + sys.argv[1:]
runpy.run_path("run.py", run_name="__main__")
