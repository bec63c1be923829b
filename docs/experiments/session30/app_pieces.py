"""Session 30 (docs/performance.md): the chat handler's own functions for the last turn of the
chat bench's conversation, best of 200 runs each (run from the repository root:
``OMP_NUM_THREADS=1 uv run python docs/experiments/session30/app_pieces.py``)."""
import json
import sys
import timeit
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from server.api.chat import build_chat_prompt  # noqa: E402
from server.api.routes.openai_schemas import ChatRequest, _parse  # noqa: E402
from server.bench.conversation import Conversation  # noqa: E402
from server.model.tokenizer import ReusingEncoder, Tokenizer  # noqa: E402
from server.scheduler.prefix_cache import prefix_hashes  # noqa: E402

tok = Tokenizer()
enc = ReusingEncoder(tok)
conv = Conversation(tok, 10, 2000, 32)
for turn in range(10):
    msgs = conv.ask(turn)
    prompt = build_chat_prompt(msgs, False)
    ids = enc.encode(prompt)
    if turn < 9:
        conv.reply("I see. " * 12)
body = json.dumps({"model": "rwkv-7", "messages": msgs, "max_tokens": 32, "stream": True,
                   "temperature": 0, "reasoning_effort": "none"}).encode()
print("body bytes", len(body), "tokens", len(ids))


def best(fn, n=200):
    return min(timeit.repeat(fn, number=1, repeat=n)) * 1e3


req = _parse(body, ChatRequest)
warm = ReusingEncoder(tok)
warm.encode(build_chat_prompt(msgs[:-1], False))
print("json.loads              %.3f ms" % best(lambda: json.loads(body)))
print("_parse (json, pydantic) %.3f ms" % best(lambda: _parse(body, ChatRequest)))
print("build_chat_prompt       %.3f ms" % best(lambda: build_chat_prompt(req.messages, False)))
print("Tokenizer.encode        %.3f ms" % best(lambda: tok.encode(prompt), 20))
print("ReusingEncoder.encode   %.3f ms" % best(lambda: warm.encode(prompt)))
print("prefix_hashes           %.3f ms" % best(lambda: prefix_hashes(array("I", ids), None)))
