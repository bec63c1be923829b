import time, torch, torch.nn.functional as F
torch.manual_seed(0)
for C in (768, 2560):
    W = torch.randn(65536, C); x = torch.randn(8, C)
    for rows in (2, 8):
        u = x[:rows]
        F.linear(u, W); torch.cat([F.linear(u[i:i+1], W) for i in range(rows)])
        t = time.perf_counter(); [F.linear(u, W) for _ in range(5)]; a = (time.perf_counter() - t) / 5
        t = time.perf_counter(); [torch.cat([F.linear(u[i:i+1], W) for i in range(rows)]) for _ in range(5)]; b = (time.perf_counter() - t) / 5
        print(f"C={C} rows={rows}: one product {a*1e3:.1f} ms, a row at a time {b*1e3:.1f} ms")
