import json
from server import RWKV070ModelLoader, DynamicScheduler
from server.task.constraint import Constraint, json_grammar
loader = RWKV070ModelLoader("tiny.pth")
scheduler = DynamicScheduler(loader, max_batch_size=8, buffer_size=32)
print("admit_wait:", scheduler.admit_wait)
schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}
task = scheduler.new_task("User: a number as JSON\n\nAssistant:", max_tokens=40, temperature=1.0, top_p=1.0, top_k=0)
task.constraint = Constraint(json_grammar(schema), loader.tokenizer)
# (new_task already queues it: no add_task)
scheduler.run()
text = task.decode(task.round_tokens()); print("constrained:", repr(text))
try: print("parsed:", json.loads(text))
except Exception as e: print("parse EXC", e)
t2 = scheduler.new_task("User: x\n\nAssistant:", max_tokens=5)
t2.logit_bias = {33: 100.0}
scheduler.run()
print("logit_bias 33:+100 ->", t2.round_tokens())
t3 = scheduler.new_task("User: x\n\nAssistant:", max_tokens=10)
t3.constraint = Constraint(json_grammar(None), loader.tokenizer)
scheduler.run(); print("any JSON:", repr(t3.decode(t3.round_tokens())))
