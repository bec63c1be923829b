"""Build the repository's `eof_v20230424.txt` from the `rwkv` package's world vocabulary.

The output is the package's `rwkv_vocab_v20230424.txt` copied line for line (ids 1..65529),
preceded by one extra first line `0 '<|endoftext|>' 13` (MODEL.md, "Vocabulary and tokenizer").
The package file has CRLF line ends; the output uses LF (token reprs never hold a raw CR).

    uv run python -m server.model.build_vocab            # writes <repo root>/eof_v20230424.txt
    uv run python -m server.model.build_vocab OUT.txt
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EOS_LINE = "0 '<|endoftext|>' 13\n"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "eof_v20230424.txt"


def package_vocab_path() -> Path:
    """Path of `rwkv_vocab_v20230424.txt` inside the installed `rwkv` package."""
    spec = importlib.util.find_spec("rwkv")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the `rwkv` package is not installed (it is a dev dependency)")
    return Path(next(iter(spec.submodule_search_locations))) / "rwkv_vocab_v20230424.txt"


def build(out: Path = DEFAULT_OUT, src: Path | None = None) -> Path:
    """Write the EOS line then the package vocabulary verbatim to `out`; returns `out`."""
    body = (src or package_vocab_path()).read_text(encoding="utf-8")
    if not body.endswith("\n"):
        body += "\n"
    if not body.startswith("1 "):
        raise ValueError("unexpected vocabulary file: first id is not 1")
    out.write_text(EOS_LINE + body, encoding="utf-8")
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT))
