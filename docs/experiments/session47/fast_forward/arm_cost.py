"""What fast-forward's check costs a constrained row a step (``Constraint.arm``: llguidance's
forced tokens from the row's grammar state) against the row's mask (``fill_masks`` alone), along
random walks through a JSON schema's grammar and a forced call's (each step: the mask, the
check, then a random allowed token). Microseconds a call: median, p90, max.

    OMP_NUM_THREADS=1 PYTHONPATH=. uv run python docs/experiments/session47/fast_forward/arm_cost.py
"""
import random
import time

import numpy as np

from server.api.tools import ToolSpec, forced_call_grammar
from server.model.tokenizer import Tokenizer
from server.task.constraint import Constraint, fill_masks, json_grammar

SCHEMA = {"type": "object", "additionalProperties": False,
          "required": ["name", "age", "tags", "address"],
          "properties": {"name": {"type": "string", "maxLength": 20},
                         "age": {"type": "integer"},
                         "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]},
                                  "maxItems": 4},
                         "address": {"type": "object", "required": ["city", "zip"],
                                     "additionalProperties": False,
                                     "properties": {"city": {"type": "string", "maxLength": 12},
                                                    "zip": {"type": "string",
                                                            "pattern": "^[0-9]{5}$"}}}}}
tok = Tokenizer()
grammars = {"schema": json_grammar(SCHEMA, lead=">"),
            "forced call": forced_call_grammar([ToolSpec("get_weather", "", SCHEMA)],
                                               {"type": "function",
                                                "function": {"name": "get_weather"}},
                                               lead=">")}
rng = random.Random(0)
for name, grammar in grammars.items():
    arm, mask = [], []
    for walk in range(20):
        c = Constraint(grammar, tok)
        words = np.zeros((1, c.words), dtype=np.int32)
        for _ in range(200):
            t0 = time.perf_counter()
            fill_masks([(c, 0)], words)
            t1 = time.perf_counter()
            c.arm(4)
            c.armed = False
            t2 = time.perf_counter()
            mask.append(t1 - t0)
            arm.append(t2 - t1)
            allowed = np.flatnonzero(np.unpackbits(words[0].view(np.uint8),
                                                   bitorder="little"))
            allowed = allowed[allowed != 0]  # (end-of-text: the walk ends there)
            if not len(allowed) or c.complete:
                break
            assert c.accept(int(rng.choice(list(allowed))))
    for what, xs in (("mask", mask), ("arm", arm)):
        xs = np.array(xs) * 1e6
        print(f"{name:12s} {what:5s} {len(xs):5d} calls  median {np.median(xs):7.1f} µs  "
              f"p90 {np.percentile(xs, 90):7.1f}  max {xs.max():8.1f}")
