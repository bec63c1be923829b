"""pyrwkv_tokenizer against this repository's Python trie (the served Tokenizer): ids of 3,002
texts (README.md, few_shot.txt, 3,000 random mixes of scripts, emoji, code), and the time of
README.md's encode. Runs on any tree with the library added:
    OMP_NUM_THREADS=1 PYTHONPATH=. uv run --with pyrwkv-tokenizer==0.9.1 python PATH/same_ids.py"""
import random
import time

import pyrwkv_tokenizer

from server.model.tokenizer import Tokenizer

tok, rt = Tokenizer(), pyrwkv_tokenizer.RWKVTokenizer()
rng = random.Random(0)
pieces = ["User: hi", "\n\n", "Assistant:", "é", "你好", " ", "abc", "🙂", "\n",
          "def f(x):\n    return x", "\t", "  ", "€", "Ünïcödé", "0123", "!!!", "```python"]
texts = [open("README.md").read(), open("few_shot.txt").read()]
texts += ["".join(rng.choice(pieces) for _ in range(rng.randrange(1, 200))) for _ in range(3000)]
bad = sum(tok.encode(t) != rt.encode(t) for t in texts)
print("texts", len(texts), "differ", bad)
text = open("README.md").read()
for encode, name in ((tok.encode, "python trie"), (rt.encode, "pyrwkv")):
    t0 = time.perf_counter()
    for _ in range(5):
        encode(text)
    print(f"{name}: {(time.perf_counter() - t0) / 5 * 1e3:.2f} ms for {len(text.encode())} bytes")
