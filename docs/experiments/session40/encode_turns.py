"""The loader's encode of each turn's prompt in issue 7's chat (the server's order: the prompt,
the same prompt again, the history with the reply twice), µs, median of 5 conversations.

    PYTHONPATH=<tree> python docs/experiments/session40/encode_turns.py
"""
import time, statistics
from server.bench.conversation import Conversation
from server.model.tokenizer import Tokenizer, ReusingEncoder
from server.api.chat import build_chat_prompt, history_text
tok = Tokenizer()
def run():
    chat = Conversation(tok, 10, 2000, 32)
    enc = ReusingEncoder(tok)
    times = []
    for turn in range(10):
        msgs = chat.ask(turn)
        p = build_chat_prompt(msgs, think=False)
        t0 = time.perf_counter(); enc.encode(p); times.append(time.perf_counter() - t0)
        enc.encode(p)  # again
        reply = "Sure, here is a short answer to that. " * 3
        enc.encode(history_text(list(msgs) + [{"role": "assistant", "content": reply}]))
        enc.encode(history_text(list(msgs) + [{"role": "assistant", "content": reply}]))
        chat.reply(reply)
    return times
ts = [run() for _ in range(5)]
for turn in range(10):
    print(turn + 1, f"{statistics.median(t[turn] for t in ts) * 1e6:.0f} us")
