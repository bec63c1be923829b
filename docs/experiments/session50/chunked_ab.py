"""Session 50: a benchmark of ``python -m server.bench`` under either WKV rule for batched
prefill passes of a split-invariant model (GPU calls 4-5).

    python3 docs/experiments/session50/chunked_ab.py old prefill --preset 2.9b --cases 64x512
    python3 docs/experiments/session50/chunked_ab.py new prefill --preset 2.9b --cases 64x512

``old``: the tree's rule (``wkv_triton.prefer_chunked``: the chunked form only while
B·H <= #SMs, the token loop above: another rounding, so such a pass's states are not cached,
``RWKV7.pass_keeps_bits``); ``new``: the rule tried in session 50 (a split-invariant model
always takes the chunked form: every pass keeps a row's bits). The calls ran with ``new`` as
the tree's rule and ``old`` patched in; the measured loss (5-11 %) sent the rule back, and this
script now patches ``new`` in instead: the same two rules either way."""
import sys

from server.model import kernels
from server.model.kernels import wkv_triton as wt

if sys.argv[1] == "new":
    def new_rule(B, T, H, device, split_invariant=False):
        return split_invariant or (T >= 64 and B * H <= wt._sm_count(device))

    kernels.prefer_chunked = wt.prefer_chunked = new_rule
elif sys.argv[1] != "old":
    sys.exit("first argument: old or new")
print("rule:", sys.argv[1], flush=True)

from server.bench.__main__ import main  # noqa: E402

main(sys.argv[2:])
