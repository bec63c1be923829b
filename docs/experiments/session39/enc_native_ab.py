"""(Needs 0b2e531's tree: the native tokenizer, withdrawn in the next commits; its diff is
native_tokenizer.diff.)

The loader's ReusingEncoder over the Python trie (Tokenizer(native=False)) against the native
tokenizer (Tokenizer(), pyrwkv-tokenizer) on a 10-turn chat as the server encodes it: each
turn's prompt, then the next-turn warm-up text (history + reply). Times the prompt encodes of
turns 2-10 (median and quartiles over 30 alternating repeats); COLD=1 touches 64 MB before each
encode (the caches cold, as after a model pass).
    [COLD=1] OMP_NUM_THREADS=1 uv run python docs/experiments/session39/enc_native_ab.py"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, ".")
from server.api.chat import build_chat_prompt, history_text  # noqa: E402
from server.bench.conversation import Conversation  # noqa: E402
from server.model.tokenizer import ReusingEncoder, Tokenizer  # noqa: E402

COLD = os.environ.get("COLD") == "1"
toks = {"python": Tokenizer(native=False), "native": Tokenizer()}
assert toks["native"]._native is not None
chat = Conversation(toks["python"], 10, 2000, 32, "You are helpful.")
seq = []
for turn in range(10):
    msgs = chat.ask(turn)
    seq.append(("prompt", build_chat_prompt(msgs, think=False)))
    reply = "Sure, here is a short answer to that. " * 3
    chat.reply(reply)
    history = list(msgs) + [{"role": "assistant", "content": reply}]
    seq.append(("warm", history_text(history, None, None)))
thrash = np.ones(64 << 20, dtype=np.uint8)
res = {name: [] for name in toks}
for rep in range(30):
    for name, tok in toks.items():
        enc = ReusingEncoder(tok)
        for i, (kind, text) in enumerate(seq):
            if COLD:
                thrash += 1
            t0 = time.perf_counter()
            ids = enc.encode(text)
            dt = time.perf_counter() - t0
            if kind == "prompt" and i >= 2:
                res[name].append(dt * 1e6)
            if rep == 0:
                assert ids == toks["python"].encode(text)
for k, v in res.items():
    print(f"{k}: prompt encodes, turns 2-10 (cold={COLD}): median {statistics.median(v):.1f} us, "
          "quartiles %.1f-%.1f" % tuple(statistics.quantiles(v, n=4)[::2]))
