import json, sys
def load(p): return [json.loads(l) for l in open(p)]
base = load(sys.argv[1])
for other in sys.argv[2:]:
    o = load(other); d = 0
    assert len(o) == len(base), (len(o), len(base))
    for (n1, v1), (n2, v2) in zip(base, o):
        assert n1 == n2
        if v1 != v2:
            d += 1
            if d <= 8: print("DIFF", other, n1, "\n   B:", json.dumps(v1, ensure_ascii=False)[:300], "\n   X:", json.dumps(v2, ensure_ascii=False)[:300])
    print(other, "diffs", d, "of", len(base))
