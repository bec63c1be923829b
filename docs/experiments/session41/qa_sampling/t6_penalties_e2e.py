"""End to end, exact: the server's first token for seeds S..S+n-1 (one n-choice request) against
an independent float64 reference draw on the model's logits (computed here in process with the
same demo weights), and greedy multi-token replies with OpenAI-style penalties against a
teacher-forced reference decode."""
import sys, json
import numpy as np, torch
sys.path.insert(0, "/tmp/qa_sampling")
from client import comp, task
from t1_sampler_ref import ref_draw, ref_u
from server.api.lifecycle import demo_state_dict
from server.model.loader import RWKV070ModelLoader
from server.model.reference import ReferenceRWKV7

sd = demo_state_dict("tiny", torch.device("cpu"))
loader = RWKV070ModelLoader("rwkv7-demo-tiny.pth", state_dict=sd)
ref = ReferenceRWKV7(sd, loader.cfg)
tok = loader.tokenizer
prompt_ids = [int(a) for a in sys.argv[1].split(",")]
st = loader.gen_state(1, loader.model.device)
fast = loader.model.prefill([prompt_ids], st)[0].double().numpy()
rs = ref.zero_state()
slow = ref.forward_seq(prompt_ids, rs).double().numpy()
print("prompt tokens", len(prompt_ids), " max|fast-ref| logits:", float(np.abs(fast - slow).max()))
p = np.exp(fast - fast.max()); p /= p.sum()
print("top prob %.4f, top-10 mass %.4f, entropy %.2f nats" % (p.max(), np.sort(p)[-10:].sum(), -(p * np.log(p)).sum()))
# greedy + OpenAI penalties, teacher-forced reference
def ref_greedy(pres, freq, n_tok, decay=1.0, mode="openai"):
    stt = ref.zero_state()
    lg = ref.forward_seq(prompt_ids, stt).double().numpy()
    counts = np.zeros(len(lg)); out = []; P = np.zeros(len(lg))
    for _ in range(n_tok):
        if mode == "openai":
            pen = pres * (counts > 0) + freq * counts
        else:
            pen = P
        t = int(np.argmax(lg - pen)); out.append(t); counts[t] += 1
        P *= decay; P[t] += (pres if P[t] == 0 else freq)
        lg = ref.forward(t, stt).double().numpy()
    return out
for pres, freq in [(0.0, 0.0), (1.5, 0.0), (0.0, 1.0), (0.5, 0.8), (2.0, 2.0), (0.01, 0.0), (0.0, 0.05), (-1.0, 0.0), (0.0, -1.0), (-2.0, 1.0)]:
    want = ref_greedy(pres, freq, 30)
    got = comp(prompt_ids, temperature=0, max_tokens=30, presence_penalty=pres, frequency_penalty=freq)[0]
    print(f"greedy presence={pres} frequency={freq}: server == OpenAI-formula reference: {got == tok.decode(want)};"
          f" distinct ref tokens {len(set(want))}")
# Task API rule with presence 0, repetition>0 (documented literal rule) vs reference
for pres, rep, dec in [(0.0, 1.0, 1.0), (1.0, 0.5, 0.9)]:
    want = ref_greedy(pres, rep, 30, decay=dec, mode="rwkv")
    got = task(prompt_ids, temperature=0, max_tokens=30, presence_penalty=pres, repetition_penalty=rep, penalty_decay=dec)
    nopen = ref_greedy(0, 0, 30)
    print(f"Task API greedy presence={pres} repetition={rep} decay={dec}: == API.md-rule ref: {got == tok.decode(want)};"
          f" == no-penalty ref: {got == tok.decode(nopen)}; distinct {len(set(want))}")
