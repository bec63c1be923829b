"""Microbenchmarks of the cached chat turn's host pieces (tiny demo, CPU). Median of many."""
import sys, time, statistics, asyncio, json
sys.path.insert(0, ".")
from array import array
import numpy as np

def bench(label, fn, n=400):
    for _ in range(20): fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns(); fn(); ts.append(time.perf_counter_ns() - t0)
    ts.sort()
    print(f"{label:55s} {ts[len(ts)//2]/1e3:8.1f} µs  (p10 {ts[len(ts)//10]/1e3:.1f}, p90 {ts[9*len(ts)//10]/1e3:.1f})")

from server.model.tokenizer import Tokenizer, ReusingEncoder, common_prefix_length
from server.bench.conversation import Conversation
from server.api.chat import build_chat_prompt
tok = Tokenizer()
chat = Conversation(tok, 10, 2000, 32, "You are a helpful assistant. ")
for t in range(9):
    chat.ask(t); chat.reply("Sure, here is a reply number %d with some words in it." % t)
msgs = chat.ask(9)
prompt = build_chat_prompt(msgs, think=False)
tokens = tok.encode(prompt)
print("prompt tokens", len(tokens))
bench("build_chat_prompt (10 turns)", lambda: build_chat_prompt(msgs, think=False))
bench("Tokenizer.encode(prompt)", lambda: tok.encode(prompt), 50)
# task params
from server.api.completion import make_tasks
from server.task.task import Task
params = dict(max_tokens=32, temperature=0.0, top_p=0.3, top_k=20, presence_penalty=0.0,
              repetition_penalty=0.0, penalty_decay=0.996)
bench("make_tasks(1)", lambda: make_tasks(tokens, 1, params, None))
task = make_tasks(tokens, 1, params, None)[0]
bench("Task.check_params", task.check_params)
from server.task.policy import model_mismatch
from server.model.checkpoint import ModelConfig
class Cfg: n_layer=2; n_embd=64; n_head=1; head_size=64; vocab_size=65536
bench("model_mismatch (2k tokens)", lambda: model_mismatch(task, Cfg))
bench("task.unfed()", task.unfed)
bench("max(tokens)", lambda: max(tokens))
bench("array('I', tokens)", lambda: array("I", tokens))
# prefix hashes
from server.scheduler.prefix_cache import prefix_hashes
a = array("I", tokens)
prev = array("I", tokens[:len(tokens) - 150])
hp = prefix_hashes(prev)
bench("prefix_hashes(2k, known 1.85k)", lambda: prefix_hashes(a, hp[:len(prev) + 1]))
bench("prefix_hashes(2k, none)", lambda: prefix_hashes(a))
# shares against 32 recent: 9 previous turns of this chat and 23 other chats
recent = []
for k in range(23):
    other = tok.encode(build_chat_prompt([{"role": "system", "content": f"You are assistant {k}."}] + msgs[1:3], think=False))
    recent.append(array("I", other))
for t in range(9):
    recent.append(array("I", tokens[:200 * (t + 1)]))
bench("32 x common_prefix_length", lambda: [common_prefix_length(a, s) for s in recent])
# app path pieces
from server.api.routes.openai_schemas import _parse, ChatRequest
body = json.dumps({"model": "rwkv-7", "messages": msgs, "max_tokens": 32, "stream": True,
                   "temperature": 0, "reasoning_effort": "none"}).encode()
print("body bytes", len(body))
bench("_parse(body, ChatRequest)", lambda: _parse(body, ChatRequest))
bench("json.loads(body)", lambda: json.loads(body))
prev_prompt = build_chat_prompt(chat.ask(8), think=False)
def reuse():
    enc = ReusingEncoder(tok)
    enc.encode(prev_prompt)
    return enc
enc = reuse()
import copy
def enc_last():
    e = ReusingEncoder.__new__(ReusingEncoder); e.__dict__.update(enc.__dict__)
    from collections import deque
    e._recent = deque(list(enc._recent), maxlen=8)
    return e.encode(prompt)
bench("ReusingEncoder.encode(last turn, prev cached)", enc_last, 100)
from server.api.encoding import past_vocab
bench("past_vocab(tokens)", lambda: past_vocab(tokens, 65536))
