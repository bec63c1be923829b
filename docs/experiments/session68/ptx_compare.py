"""Session 68: does the decode kernel's and pre_wkv's refactor onto the shared helpers
(``fused_triton.decay_terms`` / ``mixed_value``) change their instructions? Compiles both kernels
for sm_90 (no GPU needed) from two trees and compares each variant's PTX instruction counts
(opcode with its modifiers; register names and order ignored).

    python docs/experiments/session68/ptx_compare.py OLD_TREE NEW_TREE
    (e.g. .whl/ab_base, session 67's final code, against .)"""

from __future__ import annotations

import collections
import importlib
import itertools
import re
import sys

import triton
from triton.backends.compiler import GPUTarget

P16, P32 = "*fp16", "*fp32"
COMMON = dict(r_ptr=P16, k_ptr=P16, v_ptr=P16, lora_ptr=P16, vfirst_ptr=P16, keep_ptr="*i8",
              w0_ptr=P16, a0_ptr=P16, v0_ptr=P16, kk_ptr=P32, ka_ptr=P32, rk_ptr=P32)
DECODE = dict(COMMON, lw_ptr=P32, lb_ptr=P32, S_ptr=P16, out_ptr=P16, R="i32", C="i32",
              H="i32", s_sb="i32", s_sh="i32", decay_scale="fp32", eps="fp32")
PRE = dict(COMMON, w_out=P32, k_out=P32, v_out=P32, kap_out=P32, a_out=P32, bonus_out=P32,
           R="i32", C="i32", H="i32", decay_scale="fp32")


def histogram(fn, sig: dict, consts: dict, warps: int) -> collections.Counter:
    sig = dict(sig, **{k: "constexpr" for k in consts})
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts)
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                         options=dict(num_warps=warps)).asm["ptx"]
    ops = collections.Counter()
    for line in ptx.splitlines():
        line = line.strip()
        if not line or line.startswith((".", "//", "}", "{", "$")) or line.endswith(":"):
            continue
        m = re.match(r"(@!?%p\d+\s+)?([a-z][\w.:]*)", line)
        if m:
            ops[m.group(2)] += 1
    return ops


def variants(tree: str) -> dict:
    sys.path.insert(0, tree)
    for name in [n for n in sys.modules if n == "server" or n.startswith("server.")]:
        del sys.modules[name]
    d = importlib.import_module("server.model.kernels.decode_triton")
    f = importlib.import_module("server.model.kernels.fused_triton")
    print(f"{tree}: {d.__file__} (decay_terms in it: {hasattr(d, 'decay_terms')})")
    out = {}
    for first, keep, early in itertools.product((True, False), repeat=3):
        out[f"decode FIRST={first} HAS_KEEP={keep} EARLY={early}"] = histogram(
            d._decode_kernel, DECODE, dict(FIRST=first, HAS_KEEP=keep, N=64, PDL=False,
                                           EARLY=early, EVICT="evict_first", HEADS=1, STAGES=1),
            2)
    for first, keep in itertools.product((True, False), repeat=2):
        out[f"pre_wkv FIRST={first} HAS_KEEP={keep}"] = histogram(
            f._pre_wkv_kernel, PRE, dict(FIRST=first, HAS_KEEP=keep, BH=f.HEADS_PER_PROGRAM,
                                         N=64), 4)
    sys.path.remove(tree)
    return out


old, new = variants(sys.argv[1]), variants(sys.argv[2])
same = 0
for name in old:
    diff = {op: (old[name][op], new[name][op]) for op in old[name] | new[name]
            if old[name][op] != new[name][op]}
    total = sum(new[name].values())
    print(f"{name}: {total} instructions, "
          + ("the same counts" if not diff else f"differ: {dict(sorted(diff.items()))}"))
    same += not diff
print(f"{same} of {len(old)} variants with the same instruction counts")
