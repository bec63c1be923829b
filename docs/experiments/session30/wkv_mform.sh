# Session 30, call 3 (docs/performance.md): each chunk's WKV state update as one product.
# On the GPU machine, from the repository root of a checkout at 21d4c47 (or later, if the patch
# still applies): apply the experiment, then check it and time it against the served form.
git apply docs/experiments/session30/wkv_mform.diff
python3 -m server.bench.wkv --check
python3 - <<'PY'
from server.bench import wkv
wkv.PREFILL_VARIANTS = [("chunk", {}), ("mform", {}), ("mform", {"rows": 16}),
                        ("mform", {"rows": 16, "warps": 2}), ("mform", {"rows": 64, "warps": 8}),
                        ("prep", {}), ("prep_m", {}), ("chunk", {}), ("mform", {})]
wkv.prefill_table(((1, 160), (1, 1888), (1, 4096), (64, 512)), graph=True)
PY
git apply -R docs/experiments/session30/wkv_mform.diff
