import sys, torch
sys.path.insert(0, "/work/main")
sd = torch.load("model.pth", weights_only=True)
a, b, mix = [float(x) for x in sys.argv[1].split(",")]
h = sd["head.weight"].float()
h[0] *= a; h[261] *= b
h[24281] = h[0] * 1.0 + mix * h[24281]
sd["head.weight"] = h.to(sd["head.weight"].dtype)
torch.save(sd, sys.argv[2])
