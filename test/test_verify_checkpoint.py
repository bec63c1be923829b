"""``python -m server.model.verify``: a checkpoint's bytes against the CRC-32s its zip archive
carries (``torch.load`` does not check them: a file with flipped bits loads and serves garbage)."""

from __future__ import annotations

import shutil
import zipfile

from server.model.verify import damaged_entries, main


def _flip(path, entry_suffix: str, at: int = 10) -> str:
    """Flip one byte inside the data of the first entry ending with ``entry_suffix``."""
    with zipfile.ZipFile(path) as archive:
        entry = next(e for e in archive.infolist() if e.filename.endswith(entry_suffix))
    with open(path, "r+b") as f:
        f.seek(entry.header_offset + 26)
        name_len = int.from_bytes(f.read(2), "little")
        extra_len = int.from_bytes(f.read(2), "little")
        f.seek(entry.header_offset + 30 + name_len + extra_len + at)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x10]))
    return entry.filename


def test_an_intact_checkpoint_passes(tiny_model_path, capsys):
    assert damaged_entries(tiny_model_path) == []
    assert main([str(tiny_model_path)]) == 0
    assert capsys.readouterr().out.startswith(f"ok: every entry of {tiny_model_path} matches")


def test_a_flipped_bit_in_a_tensor_is_found_and_named(tiny_model_path, tmp_path, capsys):
    """One byte of one tensor's storage changed: that entry (and only it) is named, exit 1.
    The file still loads (its layout is sound): only this check sees it."""
    import torch

    ck = tmp_path / "ck.pth"
    shutil.copy(tiny_model_path, ck)
    name = _flip(ck, "/data/3")
    torch.load(ck, map_location="cpu", weights_only=True)  # (loads without a word)
    assert damaged_entries(ck) == [name]
    assert main([str(ck)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("damaged: 1 of the ") and name in out and "download" in out, out


def test_files_that_cannot_be_checked(tmp_path, capsys):
    """Missing, or not a zip archive (another format, the legacy torch.save): exit 2, one
    error line naming the file."""
    assert main([str(tmp_path / "missing.pth")]) == 2
    assert "cannot read" in capsys.readouterr().err
    other = tmp_path / "other.pth"
    other.write_bytes(b"\x80\x02" + b"not a zip" * 100)
    assert main([str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(other) in err and "not a zip archive" in err
