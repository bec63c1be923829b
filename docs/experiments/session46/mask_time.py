"""What the grammar engine costs on the host: llguidance's view of the world vocabulary (made
once per tokenizer: time and resident memory) and one row's mask a step, along random walks
through two grammars (any JSON object; a schema with an enum, a boolean and a short string),
as ``server/task/constraint.py`` computes them (``fill_masks`` for one row).

    OMP_NUM_THREADS=2 PYTHONPATH=. uv run python docs/experiments/session46/mask_time.py
"""
import random
import resource
import statistics
import time

import numpy as np

from server.model.tokenizer import Tokenizer
from server.task.constraint import Constraint, _ll_tokenizer, fill_masks, json_grammar

tok = Tokenizer()
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
_ll_tokenizer(tok)
built = time.perf_counter() - t0
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"vocabulary for llguidance: {built:.3f} s, peak RSS +{(rss1 - rss0) / 1024:.1f} MiB")

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["ok", "n", "tag"],
          "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 2, 3]},
                         "tag": {"type": "string", "maxLength": 12}}}
print("| grammar | walks | masks | median ms | p90 ms | max ms |")
print("|---|---|---|---|---|---|")
for name, grammar in (("any JSON object", json_grammar(None)), ("schema", json_grammar(SCHEMA))):
    times = []
    for seed in range(20):
        rng, c = random.Random(seed), Constraint(grammar, tok)
        words = np.zeros((1, c.words), dtype=np.int32)
        for _ in range(60):
            t0 = time.perf_counter()
            fill_masks([(c, 0)], words)
            times.append((time.perf_counter() - t0) * 1e3)
            allowed = np.flatnonzero(np.unpackbits(words[0].view(np.uint8), bitorder="little"))
            t = int(rng.choice(allowed.tolist()))
            if t == 0 or not c.accept(t):  # end-of-text: the walk is over
                break
    times.sort()
    print(f"| {name} | 20 | {len(times)} | {statistics.median(times):.3f} | "
          f"{times[int(len(times) * 0.9)]:.3f} | {times[-1]:.3f} |")
