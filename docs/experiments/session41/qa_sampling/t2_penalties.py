import numpy as np, torch
from server.model.sampler import BatchSampler, SamplingBatch
V=50; B=6
rng=np.random.default_rng(3)
logits=torch.from_numpy(rng.normal(0,1,(B,V)).astype(np.float32))
params=[(2.0,0.0,1.0),(0.0,1.0,1.0),(0.5,0.3,0.9),(1.0,1.0,0.0),(0.4,0.2,0.996),(2.0,0.0,0.5)]
sb=SamplingBatch.empty(B,V); sb.temperature.fill_(0.0)  # greedy: exact
sb.presence.copy_(torch.tensor([p[0] for p in params])); sb.repetition.copy_(torch.tensor([p[1] for p in params])); sb.decay.copy_(torch.tensor([p[2] for p in params]))
s=BatchSampler(V)
P=np.zeros((B,V)); bad=0; counts=np.zeros((B,V))
toks=[]
for step in range(30):
    got=s.sample(logits,sb).tolist()
    for r,(pr,rep,dec) in enumerate(params):
        want=int(np.argmax(logits[r].double().numpy()-P[r]))
        if want!=got[r]: bad+=1; print("mismatch",step,r,got[r],want)
        P[r]*=dec
        P[r,got[r]] += pr if P[r,got[r]]==0 else rep
        counts[r,got[r]]+=1
    toks.append(got)
print("greedy+penalty mismatches vs API.md rule:",bad, " max |P-ref|:", float(np.abs(sb.penalties.double().numpy()-P).max()))
toks=np.array(toks).T
for r in range(B): print(params[r], "distinct tokens in 30 greedy steps:", len(set(toks[r])), toks[r][:12].tolist())
