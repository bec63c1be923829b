"""Session 65 (CPU, this 2-core VM): a finished 2.9B row's clone out of a gathered group of 24 fp16
rows, row-major (before 6a40c26) against the state's layout (after), alternating, 8 rounds.
    OMP_NUM_THREADS=2 uv run python docs/experiments/session65/clone_layout.py"""
import time, torch
torch.set_num_threads(2)
n, L, H, N = 24, 32, 40, 64
old = torch.randn(n, L, H, N, N).half()
new = old.transpose(0, 1).contiguous()
fmt = torch.contiguous_format
def run_old():
    return [old[i].unsqueeze(1).clone() for i in range(n)]
def run_new():
    return [new[:, i:i + 1].clone(memory_format=fmt) for i in range(n)]
for r in range(8):
    for name, f in ((("old", run_old), ("new", run_new)) if r % 2 else (("new", run_new), ("old", run_old))):
        t0 = time.perf_counter(); out = f(); dt = time.perf_counter() - t0
        assert all(o.is_contiguous() and o.shape == (L, 1, H, N, N) for o in out)
        print(f"{name} round {r}: {dt*1e3:.1f} ms for {n} rows ({dt/n*1e3:.2f} ms a row)")
        del out
for i in (0, 7, 23):
    assert torch.equal(old[i].unsqueeze(1), new[:, i:i+1])
print("rows equal")
