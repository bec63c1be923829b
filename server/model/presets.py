"""The published RWKV-7 sizes random checkpoints come in (``server.model.random``, ``--demo``).
Kept apart from random.py, which needs torch: ``run.py`` checks a demo's preset before it
imports torch (seconds), so a wrong name fails at once."""

PRESETS: dict[str, tuple[int, int]] = {  # name -> (n_layer, n_embd)
    "tiny": (2, 128),
    "0.1b": (12, 768),
    "0.4b": (24, 1024),
    "1.5b": (24, 2048),
    "2.9b": (32, 2560),
    "7.2b": (32, 4096),
    "13.3b": (61, 4096),
}
