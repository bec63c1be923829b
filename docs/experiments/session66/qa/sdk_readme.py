"""The README's "Python SDK (no HTTP)" example, run literally (item 1 of session 66's QA brief),
twice (the second run finds `_coder` stored). Model: a random tiny checkpoint
(`uv run python -m server.model.random /tmp/qa66/sdk/model.pth --preset tiny`).
Run from the repository root:
    RWKV_TASK_DB_PATH=/tmp/qa66/sdk/sdk_tasks.db uv run python docs/experiments/session66/qa/sdk_readme.py
(the README says to put the script in the repository root; PYTHONPATH is set here instead).
"""
import os, sys
sys.path.insert(0, os.getcwd())
# (no checkpoint at hand: uv run python -m server.model.random model.pth --preset 0.1b)
from server import RWKV070ModelLoader, DynamicScheduler
from server.task.manager import get_task_manager

loader = RWKV070ModelLoader("/tmp/qa66/sdk/model.pth")                 # tokenizer: eof_v20230424.txt
scheduler = DynamicScheduler(loader, max_batch_size=256, buffer_size=32)

questions = ["Hi, who are you?", "Write quicksort in Python", "1+1=?"]
tasks = [scheduler.new_task(f"User: {q}\n\nAssistant:", max_tokens=200, temperature=0.7)
         for q in questions]
scheduler.run()                                          # blocks until all finish
for q, t in zip(questions, tasks):
    print(q, "->", t.decode(t.pop_tokens())[:60])

# templates: prefill once (max_tokens=0), fork many times; stored in the task database
task_manager = get_task_manager()
if task_manager.get_task("_coder") is None:              # stored by an earlier run?
    tpl = scheduler.new_task("User: You are a senior Python engineer.\n\nAssistant: OK.\n\n", max_tokens=0)
    scheduler.run()
    task_manager.put_task("_coder", tpl)                 # an existing id raises TemplateExists
task = task_manager.get_task(task_manager.fork_template("_coder"))
task.continue_gen()
task.prefill(loader.encode("User: Write a thread-safe singleton\n\nAssistant:"))
task.max_tokens = 300
scheduler.add_task(task)
scheduler.run()
print(task.task_id, "->", task.decode(task.pop_tokens())[:60])
