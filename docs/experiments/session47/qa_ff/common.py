import os, sys
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, "/tmp/qa_ff/repo"); sys.path.insert(0, "/tmp/qa_ff/repo/test")
import torch
torch.set_num_threads(1)
from server.model.loader import RWKV070ModelLoader
import server.scheduler.guide as guide
from server.scheduler import DynamicScheduler
from server.task.constraint import Constraint, json_grammar
from server.api.tools import ToolSpec, forced_call_grammar
from server.task.task import Status

L = RWKV070ModelLoader("/tmp/qa_ff/tiny.pth", device="cpu")
PARAMS = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
          "properties": {"city": {"type": "string", "maxLength": 12},
                         "unit": {"enum": ["celsius", "fahrenheit"]}}}
CALL = forced_call_grammar([ToolSpec("get_weather", "", PARAMS), ToolSpec("get_time", "", {})],
                           {"type": "function", "function": {"name": "get_weather"}}, lead=">")
SAMPLED = dict(temperature=1.0, top_k=0, top_p=1.0)

def prompt(i):
    return L.encode(f"User: weather {i}?\n\nAssistant: <think>\n</think")

class ff_off:
    def __enter__(self):
        self.old = guide.FF_MIN; guide.FF_MIN = 10**9
    def __exit__(self, *a):
        guide.FF_MIN = self.old
