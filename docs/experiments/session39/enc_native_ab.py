"""(Needs 0b2e531's tree: the native tokenizer, withdrawn in the next commits; its diff is
native_tokenizer.diff.)

The loader's ReusingEncoder over the Python trie (Tokenizer(native=False)) against the native
tokenizer (Tokenizer(), pyrwkv-tokenizer) on a 10-turn chat as the server encodes it
(encode_timing.py).
    [COLD=1] OMP_NUM_THREADS=1 uv run python docs/experiments/session39/enc_native_ab.py"""
import sys
from pathlib import Path

sys.path[:0] = [".", str(Path(__file__).parent)]
from encode_timing import chat_texts, time_encoders  # noqa: E402

from server.model.tokenizer import ReusingEncoder, Tokenizer  # noqa: E402

python, native = Tokenizer(native=False), Tokenizer()
assert native._native is not None
time_encoders({"python": lambda: ReusingEncoder(python), "native": lambda: ReusingEncoder(native)},
              chat_texts(python), python.encode)
