"""repro_budget_last_scan.py's case with a candidate fix monkeypatched: the last token may
exceed the step's budget by one (``_with_last`` without ``n < budget``), so it always goes
with the prompt's pass, wherever the budget cut fell."""
import sys
sys.path.insert(0, "/tmp/fz_cache/fuzz"); sys.path.insert(0, "/tmp/fz_cache")
from server.scheduler.prefill import Prefiller
def _with_last(self, task, n, budget):
    return n + 1 if n == len(task.pending) - 1 and self._decodes(task) else n
Prefiller._with_last = _with_last
sys.argv = [sys.argv[0], "97"]
exec(open("/tmp/fz_cache/fuzz/repro_budget_last_scan.py").read())
