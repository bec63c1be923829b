# Run: cd /tmp/h2 && OMP_NUM_THREADS=1 TRITON_INTERPRET=1 PYTHONPATH=.:test uv run python -c "import interpreter_patch; exec(open('review/kernel_fuzz.py').read())"
import torch
from server.model.kernels import sampling_triton as st
from server.model.sampler import BatchSampler, SamplingBatch

def case(B, V, decay, tokens, active, P=None, pres=None, rep=None, seed=0, name=""):
    g = torch.Generator().manual_seed(seed)
    sb = SamplingBatch.empty(B, V)
    if P is None:
        P = torch.rand(B, V, generator=g); P[P < 0.7] = 0.0
    sb.penalties.copy_(P)
    sb.presence.copy_(torch.rand(B, generator=g) * 2 if pres is None else pres)
    sb.repetition.copy_(torch.rand(B, generator=g) if rep is None else rep)
    sb.decay.copy_(decay)
    sb.counter.copy_(torch.arange(B))
    want = SamplingBatch(**{k: getattr(sb, k).clone() for k in sb.__dataclass_fields__})
    BatchSampler._update(want, tokens, active)
    st.update(sb.penalties, tokens, sb.presence, sb.repetition, sb.decay, active, sb.counter)
    same_bits = torch.equal(sb.penalties.view(torch.int32), want.penalties.view(torch.int32))
    ok = same_bits and torch.equal(sb.counter, want.counter)
    bad = (sb.penalties.view(torch.int32) != want.penalties.view(torch.int32)).nonzero().tolist()[:4]
    print(f"{name:45s} {'OK' if ok else 'DIFF'} {bad}",
          [(sb.penalties[r, c].item(), want.penalties[r, c].item()) for r, c in bad])

V = 10000
B = 6
# decay 1, tokens in block 1 and 2 (the elif path for j > 0), no mask and a mask
tok = torch.tensor([4095, 4096, 8191, 8192, 9999, 0])
for act in (None, torch.tensor([True, False, True, True, False, True])):
    case(B, V, torch.ones(B), tok, act, name=f"decay 1, tokens at block edges act={act is not None}")
    case(B, V, torch.tensor([0.5, 0.0, 1.0, 0.9, 0.99, 1.0]), tok, act, name=f"mixed decays act={act is not None}")
# B large, V not a multiple of 4096
B2, V2 = 300, 5000
g = torch.Generator().manual_seed(1)
case(B2, V2, torch.where(torch.rand(B2, generator=g) < 0.5, 1.0, 0.97), torch.randint(0, V2, (B2,), generator=g),
     torch.rand(B2, generator=g) < 0.8, name="B 300, V 5000, random")
# -0.0 penalties on an inactive row's token (negative presence decayed by 0)
P = torch.zeros(2, V); P[0, 7] = -0.0; P[1, 4100] = -0.0
case(2, V, torch.tensor([1.0, 0.5]), torch.tensor([7, 4100]), torch.tensor([False, False]), P=P,
     name="inactive rows with -0.0 at their token")
# inf presence on an inactive row (torch: inf * False = NaN)
case(2, V, torch.tensor([1.0, 0.5]), torch.tensor([7, 4100]), torch.tensor([False, True]),
     pres=torch.tensor([float('inf'), 1.0]), name="inactive row with inf presence")
print("done")
