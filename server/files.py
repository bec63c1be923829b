"""Writing a file whole: nothing half-written is ever left at its path."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path


def write_whole(path: str | Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` a temporary file beside ``path`` (same folder: one file system), then
    rename it to ``path``: a write cut short (Ctrl-C, a full disk) leaves no partial file there
    (a cut checkpoint, its later tensors missing, passed ``verify``'s checksums; session 43's
    QA). A replaced file keeps its permissions. The temporary file has ``path``'s own name, in
    a folder of this thread's beside it (a short name: any name ``path`` may have fits): a
    ``torch.save`` archive names its entries after the file it is written to, so a random
    checkpoint's read ``m/data/0``, as a published one's do its name's, not the temporary
    name (which ``verify`` quoted for a damaged entry). Both are removed on every way out; an
    ``OSError`` names ``path``."""
    path = Path(path)
    folder = path.with_name(f".rwkv-write-{os.getpid()}-{threading.get_ident()}")
    tmp = folder / path.name
    try:
        folder.mkdir(exist_ok=True)  # (one a killed process of this pid and thread left)
        write(tmp)
        if os.path.isfile(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as e:  # (named by the file asked for, not the temporary one)
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)
        try:
            folder.rmdir()
        except OSError:  # (not there: its mkdir failed; or not empty: another file's leftover)
            pass
