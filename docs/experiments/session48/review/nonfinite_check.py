"""Non-finite logits: new Guide.apply vs 6738fa2's masked_fill (token 5 alone allowed)."""
import numpy as np, torch
import server.scheduler.guide as G

class FakeC:
    words = 2
    def arm(self, n): return False

V = 64
words = np.zeros((1, 2), np.int32); words[0, 0] = 1 << 5
G.fill_masks = lambda rs, w: w.__setitem__(0, words[0])
for name, val in [("+inf", float("inf")), ("nan", float("nan")), ("-inf", float("-inf"))]:
    logits = torch.zeros(1, V); logits[0, 9] = val  # a disallowed token
    g = G.Guide({0: FakeC()}, V, torch.device("cpu"), 0)
    new = g.apply(logits)
    old = logits.masked_fill(~(torch.arange(V) == 5), float("-inf"))
    print(f"disallowed logit {name}: new[9]={new[0, 9].item()} old[9]={old[0, 9].item()}; "
          f"argmax new={new.argmax().item()} old={old.argmax().item()}; "
          f"softmax new finite={bool(torch.softmax(new, 1).isfinite().all())}")
