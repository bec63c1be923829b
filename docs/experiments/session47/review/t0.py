import time
from common import loader
t=time.time(); L = loader(); print("load", time.time()-t)
from server.scheduler import DynamicScheduler
s = DynamicScheduler(L, max_batch_size=4, buffer_size=4)
t = s.new_task(L.encode("hello"), max_tokens=5, temperature=0)
s.run(); print(t.output, t.finish_reason)
