import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.argv = ["stress"] + sys.argv[1:]
runpy.run_module("server.bench.stress", run_name="__main__")
