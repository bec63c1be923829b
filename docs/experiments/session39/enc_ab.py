"""HEAD's ReusingEncoder ("old") against the working tree's ("new": apply
reusing_encoder_variant.diff first) on a 10-turn chat as the server encodes it: each turn's
prompt, then the next-turn warm-up text (history + reply). Times the prompt encodes of turns
2-10 (median and quartiles over 30 alternating repeats); COLD=1 touches 64 MB before each
encode (the caches cold, as after a model pass).
    [COLD=1] OMP_NUM_THREADS=1 uv run python docs/experiments/session39/enc_ab.py"""
import importlib.util
import os
import statistics
import subprocess
import sys
import time

COLD = os.environ.get("COLD") == "1"
sys.path.insert(0, ".")
from server.api.chat import build_chat_prompt, history_text
from server.bench.conversation import Conversation
from server.model import tokenizer as new_mod
src = subprocess.run(["git", "show", "HEAD:server/model/tokenizer.py"],
                     capture_output=True, text=True).stdout
spec = importlib.util.spec_from_loader("old_tok", loader=None)
old_mod = importlib.util.module_from_spec(spec)
old_mod.__file__ = new_mod.__file__
exec(src, old_mod.__dict__)
tok = new_mod.Tokenizer()
chat = Conversation(tok, 10, 2000, 32, "You are helpful.")
seq = []
for turn in range(10):
    msgs = chat.ask(turn)
    seq.append(("prompt", build_chat_prompt(msgs, think=False)))
    reply = "Sure, here is a short answer to that. " * 3
    chat.reply(reply)
    history = list(msgs) + [{"role": "assistant", "content": reply}]
    seq.append(("warm", history_text(history, None, None)))
import numpy as np
thrash = np.ones(64 << 20, dtype=np.uint8)
res = {"old": [], "new": []}
for rep in range(30):
    for name, mod in (("old", old_mod), ("new", new_mod)):
        enc = mod.ReusingEncoder(tok)
        for i, (kind, text) in enumerate(seq):
            if COLD:
                thrash += 1  # 64 MB touched: the caches cold, as after a model pass
            t0 = time.perf_counter()
            ids = enc.encode(text)
            dt = time.perf_counter() - t0
            if kind == "prompt" and i >= 2:
                res[name].append(dt * 1e6)
            if rep == 0:
                assert ids == tok.encode(text)
for k, v in res.items():
    print(k, "prompt encodes, turns 2-10: median %.1f us, quartiles %.1f-%.1f" % (
        statistics.median(v), *statistics.quantiles(v, n=4)[::2]))
