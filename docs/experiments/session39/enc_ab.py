"""HEAD's ReusingEncoder ("old") against the working tree's ("new": apply
reusing_encoder_variant.diff first) on a 10-turn chat as the server encodes it
(encode_timing.py).
    [COLD=1] OMP_NUM_THREADS=1 uv run python docs/experiments/session39/enc_ab.py"""
import importlib.util
import subprocess
import sys
from pathlib import Path

sys.path[:0] = [".", str(Path(__file__).parent)]
from encode_timing import chat_texts, time_encoders  # noqa: E402

from server.model import tokenizer as new_mod  # noqa: E402

src = subprocess.run(["git", "show", "HEAD:server/model/tokenizer.py"],
                     capture_output=True, text=True).stdout
old_mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("old_tok", None))
old_mod.__file__ = new_mod.__file__
exec(src, old_mod.__dict__)
tok = new_mod.Tokenizer()
time_encoders({"old": lambda: old_mod.ReusingEncoder(tok),
               "new": lambda: new_mod.ReusingEncoder(tok)}, chat_texts(tok), tok.encode)
