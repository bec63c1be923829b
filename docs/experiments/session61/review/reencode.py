# Session 61's review (a helper): python docs/experiments/session61/review/reencode.py
# Re-encoding a decoded reply (what openai.py's next-turn warm does) can yield ids >= V
# even when every sampled id was < V (warm_prefix refuses them since 4a349a8).
import sys; sys.path.insert(0, ".")  # (run from the repository root)
from server.model.tokenizer import Tokenizer
tok = Tokenizer()
V = 512                     # a checkpoint with a small vocabulary (random generator's --vocab)
reply = [tok.encode(c)[0] for c in "hello world"]   # single-byte ids, all < V
print("sampled ids < V:", all(t < V for t in reply), reply)
again = tok.encode(tok.decode(reply))
print("re-encoded:", again, "ids >= V:", [t for t in again if t >= V])
