import torch, torch.nn.functional as F
torch.manual_seed(0)
for C in (128, 768, 2560):
    W = torch.randn(65536, C) * 0.05; x = torch.randn(256, C)
    ref = F.linear(x, W)
    bad = [r for r in list(range(2, 17)) + [24, 32, 64, 128] if not torch.equal(F.linear(x[:r], W), ref[:r])]
    one = torch.equal(F.linear(x[:1], W), ref[:1])
    pad = torch.equal(F.linear(torch.cat([x[:1], torch.zeros(1, C)]), W)[:1], ref[:1])
    print(f"C={C}: rows differing from 256-row product: {bad}; 1 row equal: {one}; 1 row padded to 2 equal: {pad}")
