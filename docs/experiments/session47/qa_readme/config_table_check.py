"""Compare README's configuration table with server.config.Settings defaults."""
import re, os
for k in list(os.environ):
    if k.startswith("RWKV_"): del os.environ[k]
from server.config import Settings
s = Settings()
fields = type(s).model_fields
readme = open("README.md").read()
rows = re.findall(r"^\| `(RWKV_[A-Z0-9_]+)`(?:, `(RWKV_[A-Z0-9_]+)`)? \| ([^|]*) \|", readme, re.M)
seen = set()
for a, b, default in rows:
    names = [a] + ([b] if b else [])
    defaults = [d.strip().strip("`") for d in default.split(",")] if b else [default.strip().strip("`")]
    for n, d in zip(names, defaults):
        f = n[5:].lower(); seen.add(f)
        if f not in fields:
            print(f"{n}: in README, no such setting ({d})"); continue
        actual = getattr(s, f)
        ok = str(actual).lower() == d.lower() or (d == "—" and actual in (None, "")) or (str(actual) == d.replace(",", ""))
        try: ok = ok or float(actual) == float(d)
        except Exception: pass
        if not ok: print(f"{n}: README default {d!r}, actual {actual!r}")
for f in fields:
    if f not in seen: print(f"RWKV_{f.upper()}: a setting, not in the README table (default {getattr(s, f)!r})")
print("checked", len(seen), "README rows against", len(fields), "settings")
