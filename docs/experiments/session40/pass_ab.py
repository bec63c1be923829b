"""A cached chat turn's pass (152 tokens, 2.9B) with the chunked WKV's transition folded or not
and the prefill's WKV chain with PDL or not: one variant per process.

    python3 docs/experiments/session40/pass_ab.py FOLD PDL [prefill bench options]

FOLD, PDL: 0 or 1 (``wkv_triton.FOLD``, ``pdl.PREFILL_CHAIN``); the options go to
``python -m server.bench prefill`` (default: ``--preset 2.9b --cases 1x152 --scheduler 0
--profile 152``)."""

import sys

from server.model.kernels import pdl, wkv_triton

if __name__ == "__main__":
    wkv_triton.FOLD = sys.argv[1] == "1"
    pdl.PREFILL_CHAIN = sys.argv[2] == "1"
    print(f"# FOLD={wkv_triton.FOLD} PREFILL_CHAIN={pdl.PREFILL_CHAIN}", flush=True)
    from server.bench.__main__ import main

    main(["prefill", *(sys.argv[3:] or ["--preset", "2.9b", "--cases", "1x152", "--scheduler",
                                        "0", "--profile", "152"])])
