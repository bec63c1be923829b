"""A logit_bias changed on a queued task after add_task (validated only there) reaches the
pulse unchecked: does one bad row fail its batch neighbours?"""
from common import loader
from server.scheduler import DynamicScheduler
from server.task.task import Task
L = loader()
s = DynamicScheduler(L, max_batch_size=4, buffer_size=4)
good = Task([1, 2, 3], max_tokens=20, temperature=1.0, seed=1)
s.add_task(good)
s.step()  # good is decoding
bad = Task([4, 5, 6], max_tokens=5, temperature=1.0, seed=2)
s.add_task(bad)
bad.logit_bias = {70000: 1.0}  # past the vocabulary, set after add_task
s.run()
print("good:", good.finish_reason, good.error, len(good.output))
print("bad :", bad.finish_reason, bad.error)
