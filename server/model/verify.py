"""Check a checkpoint file's bytes against its own checksums:

    python -m server.model.verify rwkv7-g1g-2.9b-20260526-ctx8192.pth

A ``.pth`` written by ``torch.save`` is a zip archive, and each entry (a tensor's storage, the
pickled dict) carries a CRC-32 of its bytes. ``torch.load`` does not check them, so a file with
flipped bits (a broken download, a failing disk) loads and serves garbage: the layout and
shape checks at start (checkpoint.py) cannot see wrong values. This reads the whole file once
and checks every entry (a 0.38 GB 0.1B file took 0.6 s on the 2-core test machine; a 2.9B
file is 15x that).

Exit status: 0 every entry matches its checksum; 1 some do not, or tensors the file refers
to are missing (a save cut short; named), or the archive's end is (a download cut short); 2
the file cannot be
checked (missing, unreadable, not a zip archive: the legacy ``torch.save`` format has no
checksums).
"""

from __future__ import annotations

import argparse
import errno
import os
import pickletools
import struct
import sys
import time
import zipfile
import zlib
from pathlib import Path

READ = 1 << 24  # bytes per read
# what zipfile raises on a damaged archive besides BadZipFile: a flipped bit in a header gives
# a name that is not UTF-8 (ValueError), flags of a feature it lacks (NotImplementedError), an
# "encrypted" entry (RuntimeError), a stored entry read as deflated (zlib.error): each was a
# traceback, not "damaged" (a review's fuzz, ~7 % of one-bit flips in the headers)
DAMAGE = (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError, RuntimeError,
          zlib.error, struct.error)


def damaged_entries(path: str | Path, progress=None) -> list[str]:
    """The names of the archive's entries whose bytes do not match their CRC-32, or that
    cannot be read out of it (empty: all match). ``progress(done_bytes, total_bytes)`` is
    called after each read. ``OSError`` if the file cannot be read, ``zipfile.BadZipFile`` if
    it is not a zip archive."""
    with zipfile.ZipFile(path) as archive:
        return _damaged(archive, progress)


def storage_keys(data: bytes) -> set[str]:
    """The storage keys a ``torch.save`` pickle (``data.pkl``) refers to, read by walking its
    opcodes (``pickletools``: nothing is unpickled, built or imported): each persistent id is
    a tuple ``("storage", type, key, location, numel)``. A small stack machine follows just
    what each opcode pops and pushes, values only for strings, numbers, tuples and the memo."""
    stack, marks, memo, keys = [], [], {}, set()
    for op, arg, _ in pickletools.genops(data):
        before, name = op.stack_before, op.name
        if name == "MARK":
            marks.append(len(stack))
            continue
        if pickletools.markobject in before:  # pops down to the last mark, and what lies below
            start = marks.pop()
            popped = stack[start:]
            del stack[start:]
            for _ in range(before.index(pickletools.markobject)):
                stack.pop()
        else:
            popped = stack[len(stack) - len(before):] if before else []
            del stack[len(stack) - len(popped):]
        if name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = stack[-1]
        value = arg
        if name in ("GET", "BINGET", "LONG_BINGET"):
            value = memo.get(arg)
        elif name in ("TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            value = tuple(popped)
        elif name == "MEMOIZE":
            value = memo[len(memo)] = popped[0]
        elif name in ("BINPERSID", "PERSID"):
            pid = popped[0] if name == "BINPERSID" else None
            if isinstance(pid, tuple) and len(pid) > 2 and pid[0] == "storage":
                keys.add(str(pid[2]))
            value = None
        stack.extend([value] * len(op.stack_after))
    return keys


def missing_entries(archive: zipfile.ZipFile) -> list[str]:
    """Storages the archive's ``data.pkl`` refers to that it does not hold: a ``torch.save``
    cut short (Ctrl-C) closed the archive with its later tensors missing, and every entry it
    held matched its checksum (session 43's QA). [] when there is no ``data.pkl`` to read."""
    names = archive.namelist()
    pkl = next((n for n in names if n.endswith("/data.pkl") or n == "data.pkl"), None)
    if pkl is None:
        return []
    root = pkl[:-len("data.pkl")]
    try:
        keys = storage_keys(archive.read(pkl))
    except Exception:  # (an unreadable pickle is a damaged entry: _damaged names it)
        return []
    have = set(names)
    return sorted(f"{root}data/{k}" for k in keys if f"{root}data/{k}" not in have)


def _damaged(archive: zipfile.ZipFile, progress=None) -> list[str]:
    bad = [f"{name} (missing)" for name in missing_entries(archive)]
    entries = archive.infolist()
    total, done = sum(e.file_size for e in entries), 0
    for entry in entries:
        try:
            with archive.open(entry) as f:  # (it checks the CRC-32 at the entry's end)
                while chunk := f.read(READ):
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
        except DAMAGE:
            bad.append(entry.filename)
        except OSError as e:  # a seek before the file's start: the offset the archive's
            if e.errno != errno.EINVAL:  # damaged directory gives (exit 2, "cannot read")
                raise
            bad.append(entry.filename)
    return bad


def _starts_as_zip(path: str) -> bool:
    """The file begins with a zip entry's header (``PK\\x03\\x04``): a ``torch.save`` archive,
    whole or cut short (a legacy pickle begins otherwise)."""
    with open(path, "rb") as f:
        return f.read(4) == b"PK\x03\x04"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m server.model.verify",
                                 description="Check every entry of a .pth checkpoint (a zip "
                                 "archive) against its CRC-32: torch.load does not, so a file "
                                 "with flipped bits loads and serves garbage.",
                                 epilog="Exit status: 0 intact, 1 damaged, 2 not checkable.")
    ap.add_argument("checkpoint", help="an RWKV-7 .pth file")
    args = ap.parse_args(argv)
    t0 = last = time.monotonic()

    def progress(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= 5:
            last = now
            print(f"... {done / 1e9:.1f} of {total / 1e9:.1f} GB checked", file=sys.stderr)

    if os.path.exists(args.checkpoint) and not os.path.isfile(args.checkpoint):
        print(f"error: {args.checkpoint} is not a regular file", file=sys.stderr)  # (a FIFO
        return 2  # was read for ever)
    try:
        with zipfile.ZipFile(args.checkpoint) as archive:
            count, bad = len(archive.infolist()), _damaged(archive, progress)
    except OSError as e:
        print(f"error: cannot read {args.checkpoint}: {e.strerror or e}", file=sys.stderr)
        return 2
    except DAMAGE:  # (OSError is none of them: the file could not be read)
        if _starts_as_zip(args.checkpoint):  # its end (the archive's directory) is missing
            print(f"damaged: {args.checkpoint} starts as a zip archive but its end (the "
                  "archive's directory) is missing or broken: a download or copy cut short "
                  "or damaged; download or copy the file again")
            return 1
        print(f"error: {args.checkpoint} is not a zip archive (a .pth from torch.save since "
              "torch 1.6 is one; the legacy format carries no checksums to check)",
              file=sys.stderr)
        return 2
    size = Path(args.checkpoint).stat().st_size
    seconds = time.monotonic() - t0
    if bad:
        shown = ", ".join(bad[:8]) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
        print(f"damaged: {args.checkpoint}: {len(bad)} entries (of {count} held) do not match "
              f"their checksums or are missing ({shown}); download or copy the file again")
        return 1
    print(f"ok: every entry of {args.checkpoint} matches its checksum ({size / 1e9:.2f} GB "
          f"in {seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
