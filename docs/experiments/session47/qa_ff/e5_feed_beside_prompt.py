"""A fast-forwarded row whose forced run is fed in the same prefill pass as another request's
prompt (arriving as the row pauses): is its reply the one it gets alone?  With and without a
prefix cache (the server's exact one)."""
from common import *
from server.scheduler.prefix_cache import PrefixCache

def make(cache):
    return DynamicScheduler(L, max_batch_size=8, buffer_size=8,
                            prefix_cache=PrefixCache(1 << 30) if cache else None)

def one(i, cache, arrive=None, greedy=False):
    s = make(cache)
    kw = dict(temperature=0.0) if greedy else dict(seed=i, presence_penalty=0.5, **SAMPLED)
    t = s.new_task(prompt(i), max_tokens=60, **kw)
    t.constraint = Constraint(CALL, L.tokenizer)
    extra = []
    if arrive:
        def cb(tokens):
            if t.status == Status.PREFILL and not extra:
                extra.append(s.new_task(L.encode("User: tell me a story about " + "cats " * arrive + "\n\nAssistant:"),
                                        max_tokens=5, temperature=0.0))
        t.collect_callback = cb
    s.run()
    return list(t.output), bool(extra)

bad = 0
for cache in (False, True):
    for greedy in (True, False):
        for i in range(3):
            ref, _ = one(i, cache, None, greedy)
            for n in (1, 10, 40):
                out, arrived = one(i, cache, n, greedy)
                same = out == ref
                bad += not same
                print(f"cache={cache} greedy={greedy} i={i} arrive_len~{n}: {'same' if same else 'DIFFERENT'} (arrived={arrived})")
print("different:", bad)
