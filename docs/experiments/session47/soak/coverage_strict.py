"""coverage.py with every object of the tools and schemas closed (additionalProperties: false), so that
nested/$ref/array/enum calls complete more often and get validated."""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common
def close(s):
    if isinstance(s, dict):
        if s.get("type") == "object":
            s["additionalProperties"] = False
        for v in s.values(): close(v)
    elif isinstance(s, list):
        for v in s: close(v)
close(common.TOOLS); close(common.SCHEMAS); close(common.PERSON); close(common.LEG)
sys.argv = [sys.argv[0]] + sys.argv[1:]
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "coverage.py")).read())
