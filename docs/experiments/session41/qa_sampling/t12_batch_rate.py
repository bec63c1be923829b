import sys
sys.path.insert(0, "/tmp/qa_sampling")
from client import comp
PR = "The quick brown fox"
P = dict(temperature=1.0, top_p=0.9, top_k=50, presence_penalty=0.5, frequency_penalty=0, max_tokens=48)
diff = 0; tot = 0
for S in (100, 200, 300):
    batched = comp(PR, seed=S, n=8, **P)
    for i in range(8):
        single = comp(PR, seed=S + i, **P)[0]
        tot += 1
        if single != batched[i]:
            diff += 1
            k = next(j for j in range(min(len(single), len(batched[i]))) if single[j] != batched[i][j]) if single[:len(batched[i])] != batched[i][:len(single)] else min(len(single), len(batched[i]))
            print(f"seed {S+i}: batched(n=8) vs alone differ at char {k} of {len(single)}")
print(f"{diff}/{tot} seeded 48-token replies differ between n=8 batch and alone")
