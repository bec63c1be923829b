"""Relative error between the `rwkv` package (RWKV_V7_ON=1, cpu fp32) and the reference forward on
test_model_loader.py's checkpoint, with the reference's norm eps as MODEL.md has them and changed
(GroupNorm 1e-5, LayerNorm 1e-6): what the cross-check's bound must separate (session 41).

    PYTHONPATH=. uv run python docs/experiments/session41/cpu/rwkv_package_eps.py
"""
import json, os, subprocess, sys, tempfile, torch
from pathlib import Path
sys.path.insert(0, "test")
from test_model_loader import CROSS_CHECK
import server.model.reference as R
from server.model.random import make_random_state_dict
from server.model.checkpoint import infer_config
path = Path(tempfile.mkdtemp()) / "x.pth"
sd = make_random_state_dict(3, 128, 512, seed=11); torch.save(sd, path)
tokens = [5, 100, 7, 300, 2, 9, 11, 42]
env = dict(os.environ, RWKV_V7_ON="1", RWKV_JIT_ON="1", RWKV_CUDA_ON="0")
subprocess.run([sys.executable, "-c", CROSS_CHECK, str(path), json.dumps(tokens)], check=True, env=env, capture_output=True, timeout=120)
out = torch.load(str(path) + ".out", weights_only=True)
for gn, ln in ((64e-5, 1e-5), (1e-5, 1e-5), (64e-5, 1e-6)):
    R.GN_EPS, R.LN_EPS = gn, ln
    ref = R.ReferenceRWKV7(sd, infer_config(sd)); st = ref.zero_state()
    prefill = ref.forward_seq(tokens[:-1], st); step = ref.forward(tokens[-1], st)
    errs = [float((g - w).norm() / w.norm()) for g, w in ((out["prefill"], prefill), (out["step"], step), (out["wkv"], st.wkv[:, 0]))]
    print(gn, ln, ["%.2e" % e for e in errs])
