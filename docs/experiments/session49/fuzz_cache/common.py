"""Shared helpers for the cache-pressure fuzz (in process, tiny random model, CPU)."""
import os, sys, random
sys.path.insert(0, "/tmp/fz_cache"); sys.path.insert(0, "/tmp/fz_cache/test")
import torch
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
from server.model.state import State

MODEL = "/tmp/fz_cache/fuzz/tiny.pth"

def loader():
    from server.model.loader import RWKV070ModelLoader
    if not os.path.exists(MODEL):
        from server.model.random import main as make_random
        make_random([MODEL, "--preset", "tiny", "--seed", "1"])
    return RWKV070ModelLoader(MODEL, device="cpu")

def per_row(model):
    """Every product one row at a time: a row's bits independent of the batch (isolates the
    scheduler from BLAS row-count rounding)."""
    if getattr(model, "_per_row", False):
        return
    model._per_row = True
    lg, dec, pre = model._logits, model._decode_step, model.prefill
    def logits(x):
        return torch.cat([lg(x[i:i + 1]) for i in range(x.shape[0])]) if x.shape[0] > 1 else lg(x)
    def decode_step(tokens, state, active):
        outs = []
        for i in range(tokens.shape[0]):
            if active is not None and not bool(active[i]):
                outs.append(torch.zeros(1, model.cfg.vocab_size)); continue
            sub = state.select([i]); o = dec(tokens[i:i + 1], sub, None); state.assign([i], sub)
            outs.append(o)
        return torch.cat(outs)
    def prefill(token_lists, state, logits=True, mid=0, mid_state=None):
        if len(token_lists) == 1:
            return pre(token_lists, state, logits=logits, mid=mid, mid_state=mid_state)
        outs = []
        for i, t in enumerate(token_lists):
            sub = state.select([i]); o = pre([t], sub, logits=logits); state.assign([i], sub)
            outs.append(o)
        return torch.cat(outs) if logits else None
    model._logits, model._decode_step, model.prefill = logits, decode_step, prefill
