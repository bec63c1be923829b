import os, sys, tempfile
os.environ.setdefault("OMP_NUM_THREADS", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch
torch.set_num_threads(2)
from loguru import logger
logger.remove()
logger.add(sys.stderr, level="WARNING")

_LOADER = None
def loader():
    global _LOADER
    if _LOADER is None:
        from server.model.random import main as make_random
        from server.model.loader import RWKV070ModelLoader
        path = os.path.join(tempfile.gettempdir(), "rev_sched_tiny.pth")
        if not os.path.exists(path):
            make_random([path, "--preset", "tiny", "--seed", "1"])
        _LOADER = RWKV070ModelLoader(path, device="cpu")
    return _LOADER


def rowwise(model):
    """Make ``model``'s decode and prefill compute each row alone (batch 1), so that a row's
    bits never depend on the rows beside it: any difference left is the scheduler's."""
    if getattr(model, "_rowwise", False):
        return model
    dec, pre = model._decode_step, model.prefill

    def decode_step(tokens, state, active=None):
        B = tokens.shape[0]
        V = model.cfg.vocab_size
        out = torch.zeros(B, V, dtype=torch.float32, device=tokens.device)
        for r in range(B):
            if active is not None and not bool(active[r]):
                continue
            s1 = state.select([r])
            out[r] = dec(tokens[r:r + 1], s1, None)[0]
            state.assign([r], s1)
        return out

    def prefill(token_lists, state, logits=True, mid=0, mid_state=None):
        if len(token_lists) == 1:
            return pre(token_lists, state, logits=logits, mid=mid, mid_state=mid_state)
        outs = []
        for r, toks in enumerate(token_lists):
            s1 = state.select([r])
            o = pre([toks], s1, logits=logits)
            state.assign([r], s1)
            if logits:
                outs.append(o[0])
        return torch.stack(outs) if logits else None

    model._decode_step, model.prefill, model._rowwise = decode_step, prefill, True
    return model
