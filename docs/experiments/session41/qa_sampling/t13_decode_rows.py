import torch, numpy as np
from server.api.lifecycle import demo_state_dict
from server.model.loader import RWKV070ModelLoader
for dt in ("fp32", "bf16"):
    sd = demo_state_dict("tiny", torch.device("cpu"))
    L = RWKV070ModelLoader("rwkv7-demo-tiny.pth", state_dict=sd, dtype=dt)
    m = L.model; ids = L.encode("The quick brown fox")
    out = {}
    for B in (1, 2, 8):
        st = L.gen_state(B, m.device)
        lg = m.prefill([ids] * B, st)
        tok = torch.full((B,), int(lg[0].argmax()))
        d = m.decode(tok, st)
        out[B] = (lg[0].clone(), d[0].clone())
    for B in (2, 8):
        print(dt, f"B={B} vs B=1: prefill logits max|diff| {float((out[B][0]-out[1][0]).abs().max()):.3g}, decode logits max|diff| {float((out[B][1]-out[1][1]).abs().max()):.3g}, logits std {float(out[1][1].std()):.3g}")
