import os, sys
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, "/tmp/qa_review/repo")
import torch
torch.set_num_threads(1)
PATH = "/tmp/qa_review/out/tiny.pth"

def loader():
    if not os.path.exists(PATH):
        from server.model.random import main as make_random
        make_random([PATH, "--preset", "tiny", "--seed", "1"])
    from server.model.loader import RWKV070ModelLoader
    return RWKV070ModelLoader(PATH, device="cpu")
