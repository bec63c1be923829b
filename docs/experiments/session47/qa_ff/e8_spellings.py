"""At positions where the grammar forces a run (compute_ff_tokens), how many tokens does the
mask allow? More than one = step-by-step decoding may pick another spelling than the run fed."""
from common import *
import numpy as np
from server.task.constraint import fill_masks
c = Constraint(CALL, L.tokenizer)
text = '>\n<tool_call>{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}</tool_call>'
toks = L.encode(text)
W = c.words
for t in toks:
    ff = c.forced()
    m = np.zeros((1, W), dtype=np.int32)
    fill_masks([(c, 0)], m)
    bits = np.unpackbits(m.view(np.uint8), bitorder="little")
    allowed = np.flatnonzero(bits)
    if ff:
        print(f"forced {len(ff):2d} next-canonical={L.decode(ff[:1])!r:12} allowed={len(allowed):3d} e.g. {[L.decode([int(a)]) for a in allowed[:6]]}")
    assert c.accept(t)
