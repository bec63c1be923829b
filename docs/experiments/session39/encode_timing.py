"""Shared by enc_ab.py and enc_native_ab.py: a 10-turn chat's texts as the server encodes them
(each turn's prompt, then the next-turn warm-up text: history + reply) and the timing of
ReusingEncoders over them (the prompt encodes of turns 2-10, 30 alternating repeats; COLD=1
touches 64 MB before each encode: the caches cold, as after a model pass). Run from the
repository root (``server`` importable)."""
import os
import statistics
import time

import numpy as np

from server.api.chat import build_chat_prompt, history_text
from server.bench.conversation import Conversation

COLD = os.environ.get("COLD") == "1"


def chat_texts(tok) -> list[tuple[str, str]]:
    """(kind, text): "prompt" and "warm" in turn, 10 turns growing to ~2,000 tokens."""
    chat = Conversation(tok, 10, 2000, 32, "You are helpful.")
    seq = []
    for turn in range(10):
        msgs = chat.ask(turn)
        seq.append(("prompt", build_chat_prompt(msgs, think=False)))
        reply = "Sure, here is a short answer to that. " * 3
        chat.reply(reply)
        history = list(msgs) + [{"role": "assistant", "content": reply}]
        seq.append(("warm", history_text(history, None, None)))
    return seq


def time_encoders(encoders: dict, seq, reference, repeats: int = 30) -> None:
    """Print, per name of ``encoders`` (name -> a fresh encoder each repeat), the median and
    quartiles of its prompt encodes of turns 2-10; every id checked against ``reference``
    (text -> ids) in the first repeat."""
    thrash = np.ones(64 << 20, dtype=np.uint8)
    res = {name: [] for name in encoders}
    for rep in range(repeats):
        for name, make in encoders.items():
            enc = make()
            for i, (kind, text) in enumerate(seq):
                if COLD:
                    thrash += 1
                t0 = time.perf_counter()
                ids = enc.encode(text)
                dt = time.perf_counter() - t0
                if kind == "prompt" and i >= 2:
                    res[name].append(dt * 1e6)
                if rep == 0:
                    assert ids == reference(text)
    for name, v in res.items():
        q1, _, q3 = statistics.quantiles(v, n=4)
        print(f"{name}: prompt encodes, turns 2-10 (cold={COLD}): median "
              f"{statistics.median(v):.1f} us, quartiles {q1:.1f}-{q3:.1f}")
