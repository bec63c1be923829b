"""Session 62's review: RWKV_PREFILL_TOKENS below the model's chunk. A 600-token prompt through a
model built with prefill_tokens=64 (as RWKV_PREFILL_TOKENS=64 gives) on the CPU: the passes'
(rows, padded width). Run from the repository root: PYTHONPATH=. uv run python
docs/experiments/session62/review/prefill_tokens_floor.py"""
from server.model.checkpoint import infer_config
from server.model.forward import RWKV7
from server.model.random import make_random_state_dict

sd = make_random_state_dict(2, 128, 512, seed=3)
m = RWKV7(sd, infer_config(sd), prefill_tokens=64)
passes = []
run = m._prefill_pass


def spy(tokens, rows, off, *rest):
    passes.append((len(rows), m._pass_width(min(len(tokens[rows[0]]) - off, m.prefill_chunk))))
    return run(tokens, rows, off, *rest)


m._prefill_pass = spy
m.prefill([[i % 500 + 1 for i in range(600)]], m.new_state(1), logits=False)
print("model chunk", m.prefill_chunk, "passes (rows, padded width):", passes)
