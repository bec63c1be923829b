"""RWKV-7 ("x070") checkpoints: load a `.pth` state dict, read the model's sizes from its shapes,
and reject bad files with an error that names the problem (MODEL.md has the layout)."""

from __future__ import annotations

import hashlib
import math
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

HEAD_SIZE = 64
WHERE_MODELS_COME_FROM = (
    "RWKV-7 checkpoints are published in the BlinkDL/rwkv7-g1 repository on HuggingFace "
    "(e.g. rwkv7-g1g-2.9b-20260526-ctx8192.pth); for random weights in the same layout run "
    "`python -m server.model.random OUT.pth --preset tiny`"
)


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable, not RWKV-7, or has inconsistent shapes."""


@dataclass(frozen=True)
class ModelConfig:
    n_layer: int
    n_embd: int  # C
    n_head: int  # H = C / head_size
    head_size: int  # N (64)
    vocab_size: int  # V
    d_decay: int  # Dw: w1 [C, Dw], w2 [Dw, C]
    d_aaa: int  # Da: a1, a2
    d_value: int  # Dv: v1, v2 (layers >= 1; 0 when there is only one layer)
    d_gate: int  # Dg: g1, g2

    @property
    def d_ffn(self) -> int:
        return 4 * self.n_embd


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every key of a published RWKV-7 state dict with its shape, in the published order."""
    C, V, H, N, F = cfg.n_embd, cfg.vocab_size, cfg.n_head, cfg.head_size, cfg.d_ffn
    vec, mix = (C,), (1, 1, C)
    shapes: dict[str, tuple[int, ...]] = {"emb.weight": (V, C)}
    for i in range(cfg.n_layer):
        p = f"blocks.{i}."
        if i == 0:
            shapes[p + "ln0.weight"] = shapes[p + "ln0.bias"] = vec
        for ln in ("ln1", "ln2"):
            shapes[f"{p}{ln}.weight"] = shapes[f"{p}{ln}.bias"] = vec
        a = p + "att."
        for name in ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g"):
            shapes[a + name] = mix
        loras = [("w", cfg.d_decay, True), ("a", cfg.d_aaa, True), ("v", cfg.d_value, i > 0),
                 ("g", cfg.d_gate, False)]
        for letter, d, has_bias in loras:
            if letter == "v" and i == 0:
                continue
            if has_bias:
                shapes[f"{a}{letter}0"] = mix
            shapes[f"{a}{letter}1"] = (C, d)
            shapes[f"{a}{letter}2"] = (d, C)
        shapes[a + "k_k"] = shapes[a + "k_a"] = mix
        shapes[a + "r_k"] = (H, N)
        for lin in ("receptance", "key", "value", "output"):
            shapes[f"{a}{lin}.weight"] = (C, C)
        shapes[a + "ln_x.weight"] = shapes[a + "ln_x.bias"] = vec
        shapes[p + "ffn.x_k"] = mix
        shapes[p + "ffn.key.weight"] = (F, C)
        shapes[p + "ffn.value.weight"] = (C, F)
    shapes["ln_out.weight"] = shapes["ln_out.bias"] = vec
    shapes["head.weight"] = (V, C)
    return shapes


def _n_layer(sd: dict) -> int:
    """The number of blocks: their indices must be 0, 1, ... n - 1 (0 when there is none).
    Checked here, before a table of n layers' shapes is built: one stray key
    ``blocks.100000000.…`` made that table take all memory (a review, session 14)."""
    idx = {int(k.split(".")[1]) for k in sd
           if k.startswith("blocks.") and k.split(".")[1].isdigit()}
    if idx and idx != set(range(len(idx))):
        gaps = sorted(set(range(max(idx) + 1)) - idx) if max(idx) < 4 * len(idx) else None
        raise CheckpointError(f"block indices are not 0..{len(idx) - 1}: "
                              + (f"blocks {gaps[:8]} missing" if gaps else
                                 f"{len(idx)} blocks, the largest index {max(idx)}"))
    return len(idx)


def _missing(sd: dict, keys) -> list[str]:
    return [k for k in keys if k not in sd]


def _not_rwkv7(missing: list[str], sd: dict) -> CheckpointError:
    shown = ", ".join(missing[:8]) + (f", ... ({len(missing)} missing)" if len(missing) > 8 else "")
    hint = ""
    if any(k.endswith(("att.time_decay", "att.time_faaaa", "att.time_first")) for k in sd):
        hint = " (this looks like an RWKV-4/5/6 checkpoint)"
    elif sd and all(k.endswith("att.time_state") for k in sd):
        hint = (" (this is a state file, e.g. from state tuning: load it beside the model with "
                "POST /v1/tasks/import_state)")
    return CheckpointError(f"not an RWKV-7 checkpoint{hint}: missing keys {shown}")


def _layers_disagree(sd: dict) -> str | None:
    """A per-layer tensor whose shape differs between layers, said as such: the sizes are read
    from layer 0, so a wrong layer-0 tensor made every sound layer's the one named. With a
    majority, the odd layer is named against it; else two layers' shapes are given."""
    shapes: dict[str, dict[int, tuple]] = {}
    for key, t in sd.items():
        parts = key.split(".", 2)
        if (parts[0] == "blocks" and len(parts) == 3 and parts[1].isdigit()
                and isinstance(t, torch.Tensor)):
            shapes.setdefault(parts[2], {})[int(parts[1])] = tuple(t.shape)
    for name, by_layer in shapes.items():
        counts = Counter(by_layer.values())
        if len(counts) < 2:
            continue
        (common, votes), = counts.most_common(1)
        i = min(i for i, s in by_layer.items() if s != common)
        if 2 * votes > len(by_layer):
            return (f"blocks.{i}.{name} expected {common}, got {by_layer[i]} (the other layers' "
                    "shape)")
        j = min(j for j, s in by_layer.items() if s == common)
        a, b = sorted((i, j))
        return (f"blocks.{a}.{name} is {by_layer[a]} but blocks.{b}.{name} is {by_layer[b]} "
                "(the layers disagree)")
    return None


def infer_config(sd: dict) -> ModelConfig:
    """Read the sizes of an RWKV-7 state dict from its shapes and check every key's shape.
    Raises CheckpointError naming missing keys or the first key whose shape is wrong."""
    core = ["emb.weight", "head.weight", "blocks.0.att.r_k", "blocks.0.att.w1",
            "blocks.0.att.a1", "blocks.0.att.g1", "blocks.0.att.k_k", "blocks.0.att.x_r"]
    missing = _missing(sd, core)
    if missing:
        raise _not_rwkv7(missing, sd)
    n_layer = _n_layer(sd)
    odd = _layers_disagree(sd)
    if odd:
        raise CheckpointError(f"inconsistent shapes: {odd}")
    V, C = sd["emb.weight"].shape if sd["emb.weight"].dim() == 2 else (0, 0)
    if sd["blocks.0.att.r_k"].dim() != 2:
        raise CheckpointError(f"inconsistent shapes: blocks.0.att.r_k expected 2 dims [H, N], "
                              f"got {tuple(sd['blocks.0.att.r_k'].shape)}")
    H, N = sd["blocks.0.att.r_k"].shape
    lora = [k for k in ("w1", "a1", "g1") if sd[f"blocks.0.att.{k}"].dim() != 2]
    if lora:  # (a 0-dim one was an IndexError: a traceback at start-up)
        key = f"blocks.0.att.{lora[0]}"
        raise CheckpointError(f"inconsistent shapes: {key} expected 2 dims [C, D], "
                              f"got {tuple(sd[key].shape)}")
    if C == 0 or H * N != C:
        raise CheckpointError(f"inconsistent shapes: emb.weight {tuple(sd['emb.weight'].shape)} "
                              f"and blocks.0.att.r_k {(H, N)} (expected [V, C] and [C/64, 64])")
    if N != HEAD_SIZE:  # (loaded, then every CUDA pass failed: the kernels hold 64-wide heads)
        raise CheckpointError(f"blocks.0.att.r_k is {(H, N)}: a head size of {N}; RWKV-7 "
                              f"checkpoints have heads of {HEAD_SIZE} ([C/64, 64]), the only "
                              "size this server runs")
    v1 = sd.get("blocks.1.att.v1")
    if v1 is not None and v1.dim() != 2:
        raise CheckpointError(f"inconsistent shapes: blocks.1.att.v1 expected 2 dims [C, D], "
                              f"got {tuple(v1.shape)}")
    cfg = ModelConfig(
        n_layer=n_layer, n_embd=C, n_head=H, head_size=N, vocab_size=V,
        d_decay=sd["blocks.0.att.w1"].shape[-1], d_aaa=sd["blocks.0.att.a1"].shape[-1],
        d_value=v1.shape[-1] if v1 is not None else 0, d_gate=sd["blocks.0.att.g1"].shape[-1])
    shapes = expected_shapes(cfg)
    missing = _missing(sd, shapes)
    if missing:
        raise _not_rwkv7(missing, sd)
    for key, shape in shapes.items():
        got = tuple(sd[key].shape)
        if got != shape:
            whence = (f"; emb.weight is {(V, C)}: the two disagree on the vocabulary size"
                      if key == "head.weight" and got[-1:] == (C,) else "")
            raise CheckpointError(f"inconsistent shapes: {key} expected {shape}, got {got} "
                                  f"(model read as L{n_layer} C{C} V{V}{whence})")
        if not sd[key].is_floating_point():
            raise CheckpointError(f"{key} has dtype {sd[key].dtype}, expected a float dtype")
    return cfg


# what torch.load raises on a corrupt or foreign file (besides its UnpicklingError); the last
# three from files with a few bytes of data.pkl flipped (a review, session 14: 10 of 2,000 such
# files were a traceback at start-up)
_READ_ERRORS = (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError, AttributeError,
                ImportError, IndexError, KeyError, AssertionError, TypeError,
                NotImplementedError)


def tensor_problem(t: torch.Tensor) -> str | None:
    """Why a loaded tensor cannot be used as weights or state (None: it can): sparse, or saved
    on the "meta" device (a shape, no values; ``map_location`` leaves it there)."""
    if t.layout != torch.strided:
        return f"is a {t.layout} tensor; a checkpoint holds dense tensors"
    if t.device.type != "cpu":
        return f"has no values (a tensor saved on the {t.device.type!r} device)"
    return None


def is_load_error(e: BaseException) -> bool:
    """True if ``torch.load(..., weights_only=True)`` raised ``e`` for a bad or foreign file.
    Its ``UnpicklingError`` is matched by name: the server never imports ``pickle``."""
    return isinstance(e, _READ_ERRORS) or type(e).__name__ == "UnpicklingError"


def is_out_of_memory(e: BaseException) -> bool:
    """True if ``e`` is an allocation failure (host or device), not a bad file."""
    text = str(e).lower()
    return isinstance(e, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(e, RuntimeError) and ("can't allocate memory" in text
                                         or "out of memory" in text))


def _torch_load(path: Path) -> object:
    """torch.load with weights_only=True, memory-mapped when the file format allows it."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as e:
        if "mmap" not in str(e):  # legacy (non-zip) files cannot be memory-mapped
            raise
    return torch.load(path, map_location="cpu", weights_only=True)


PERMISSION_DENIED = ("cannot read {path}: permission denied (make the file, and the folders "
                     "above it, readable by the user the server runs as)")


def looks_like_safetensors(path: Path) -> bool:
    """Whether the file starts as a safetensors file does: an 8-byte little-endian header
    length, then the header's JSON (``{``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(9)
    except OSError:
        return False
    return len(head) == 9 and head[8:] == b"{" and 2 <= int.from_bytes(head[:8], "little") \
        <= path.stat().st_size - 8


GIT_LFS_POINTER = b"version https://git-lfs.github.com/spec/"  # how a pointer file begins


def _not_a_checkpoint_yet(path: Path) -> str | None:
    """Why ``path`` holds no checkpoint at all (None: it holds something): empty, or the Git
    LFS pointer a repository cloned without its large files leaves under the checkpoint's name
    (Hugging Face's; torch called it "Unsupported operand 118")."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(GIT_LFS_POINTER))
    except OSError:
        return None
    if not head:
        return f"{path} is empty (0 bytes): a download or copy that failed; get it again"
    if head == GIT_LFS_POINTER:
        return (f"{path} is a Git LFS pointer (a small text file naming the checkpoint), not "
                "the checkpoint: the repository was cloned without its large files; fetch "
                "them (`git lfs install && git lfs pull`) or download the .pth itself")
    return None


def _unreadable(path: Path, e: Exception) -> str:
    """Why torch.load could not read ``path`` (a CheckpointError's message). Not "corrupt"
    where the file was never read (no permission: a QA report, session 31) or is another
    format: a safetensors file was called corrupt, with torch's advice to install safetensors,
    though this server reads .pth files only."""
    if isinstance(e, PermissionError):
        return PERMISSION_DENIED.format(path=path)
    if isinstance(e, OSError) and e.errno is not None:  # an I/O error, not the file's content
        return f"cannot read {path}: {load_error_text(e)}"
    if nothing := _not_a_checkpoint_yet(path):
        return nothing
    if looks_like_safetensors(path):
        return (f"{path} looks like a safetensors file; this server reads RWKV-7 .pth "
                "checkpoints (torch.save state dicts), not safetensors: torch.save its "
                f"tensors as a .pth, or get the .pth. {WHERE_MODELS_COME_FROM}")
    return (f"cannot read {path} as a PyTorch checkpoint (corrupt, or not a state dict of "
            f"tensors): {load_error_text(e)}")


def load_error_text(e: Exception) -> str:
    """The informative line of a torch.load error. A weights-only refusal starts with advice to
    load the file with ``weights_only=False`` (code execution: never passed on) and gives its
    reason later, past the 300 characters shown (a review, session 14)."""
    text = str(e)
    marker = "WeightsUnpickler error:"
    if marker in text:
        text = text[text.index(marker):].replace("\n", " ")
        text = " ".join(text.split()).split(" Check the documentation")[0]
    elif text.startswith("Weights only load failed"):
        lines = [ln.strip() for ln in text.splitlines()[1:] if ln.strip()]
        reason = next((ln for ln in lines if not ln.startswith("Check the documentation")),
                      "the file holds objects other than tensors")
        text = f"refused by torch.load's safe (weights-only) loader: {reason}"
    else:
        text = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(e).__name__}: {text[:300]}"


WRAPPER_PREFIXES = ("module.", "_orig_mod.")  # DDP's, torch.compile's: on every key of a
# state dict saved from the wrapped module


def unwrap_keys(sd: dict) -> tuple[dict, str]:
    """``sd`` without the training wrappers' key prefixes (``WRAPPER_PREFIXES``) when every
    key carries them, and the prefix removed ("" when none)."""
    removed = ""
    while isinstance(sd, dict) and sd:
        prefix = next((p for p in WRAPPER_PREFIXES
                       if all(isinstance(k, str) and k.startswith(p) for k in sd)), None)
        if prefix is None:
            break
        sd, removed = {k[len(prefix):]: v for k, v in sd.items()}, removed + prefix
    return sd, removed


def load_checkpoint(path) -> tuple[dict[str, torch.Tensor], ModelConfig]:
    """Load an RWKV-7 `.pth` state dict (bf16/fp16/fp32) and read its ModelConfig from the shapes.
    Tensors stay on the CPU in the file's dtype (memory-mapped where possible)."""
    path = Path(path)
    try:
        path.stat()
    except PermissionError:  # a folder above it that may not be searched: not "does not exist"
        raise CheckpointError(PERMISSION_DENIED.format(path=path)) from None
    except OSError:
        pass
    if not path.is_file():
        what = "is a directory, not a checkpoint file" if path.is_dir() else "does not exist"
        raise CheckpointError(f"model file {path} {what}. {WHERE_MODELS_COME_FROM}")
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # (PyTorch's loader opens files by a UTF-8 name: it failed with
        # "corrupt, or not a state dict of tensors"; session 67's mutation review)
        raise CheckpointError(f"cannot open {path!r}: its name is not valid UTF-8, which PyTorch "
                              "cannot open; rename the file (or link it under a UTF-8 name)") \
            from None
    try:
        sd = _torch_load(path)
    except Exception as e:
        if is_out_of_memory(e):  # (was called corrupt: a review, session 14)
            raise CheckpointError(f"ran out of memory reading {path} "
                                  f"({path.stat().st_size / 2**30:.1f} GiB; a legacy, non-zip "
                                  "file is read whole, not memory-mapped): "
                                  f"{load_error_text(e)}") from e
        if not is_load_error(e):
            raise
        raise CheckpointError(_unreadable(path, e)) from e
    sd, removed = unwrap_keys(sd)
    if removed:
        from server.logger import get_logger

        get_logger(__name__).info(f"{path.name}: every key began with {removed!r} (saved from "
                                  "a training wrapper); read without it")
    return sd, check_state_dict(sd, path)


DIGEST_VALUES = 256  # values hashed at each end of every tensor


def weights_digest(sd: dict) -> str:
    """A short digest of a checkpoint's weights, to tell whether a stored state was computed by
    this model: every key and shape, and the first and last ``DIGEST_VALUES`` values of each
    tensor rounded to bfloat16 (the published files' dtype: the same weights saved as fp32
    digest alike). Reads two pages a tensor of a memory-mapped file."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(sd):
        t = sd[name]
        flat = t.reshape(-1)
        ends = flat if flat.numel() <= 2 * DIGEST_VALUES else torch.cat(
            (flat[:DIGEST_VALUES], flat[-DIGEST_VALUES:]))
        h.update(f"{name}{tuple(t.shape)}".encode())
        # (through a CPU copy: a caller's tensors may be on a GPU)
        h.update(ends.float().to(torch.bfloat16).cpu().view(torch.int16).numpy().tobytes())
    return h.hexdigest()


# layer 0's value-residual LoRA: some published files carry it; RWKV-7 never reads it (layer 0's
# value is v_first itself), so it is no variant's extra parameter
LAYER0_VALUE_LORA = ("blocks.0.att.v0", "blocks.0.att.v1", "blocks.0.att.v2")


def unused_keys(sd: dict, cfg: ModelConfig) -> list[str]:
    """Keys of ``sd`` the RWKV-7 forward never reads (``expected_shapes``): a variant's extra
    parameters (they would be ignored: its output would not be the variant's) or leftovers of
    training."""
    known = expected_shapes(cfg)
    return [k for k in sd if k not in known and k not in LAYER0_VALUE_LORA]


def finite_weight(key: str, cast: torch.Tensor, stored: torch.Tensor) -> torch.Tensor:
    """``cast`` (weight ``key`` in its run dtype), or CheckpointError when it cannot run: NaN
    or infinite values in the file, or values the cast to the run dtype overflowed
    (``stored`` is the file's tensor). Such a model loaded and answered every request with
    empty text (a QA report, session 28). One min/max pass (NaN propagates through both):
    ~20x faster on the CPU than ``isfinite().all()``, which doubled a 0.4B model's load time
    there."""
    if cast.numel() == 0 or all(math.isfinite(x.item()) for x in torch.aminmax(cast)):
        return cast
    if not bool(torch.isfinite(stored).all()):
        raise CheckpointError(f"{key} holds NaN or infinite values (a damaged or diverged "
                              "checkpoint)")
    big = stored.abs().max().item()
    name = str(cast.dtype).removeprefix("torch.")
    raise CheckpointError(f"{key} holds values up to {big:.3g}, beyond {name}'s range: run it "
                          "in another dtype (RWKV_DTYPE=bf16 or fp32)")


def check_state_dict(sd, where) -> ModelConfig:
    """The ModelConfig of a loaded state dict (a file's, or one made in memory: the demo's), or
    CheckpointError naming ``where`` and what is wrong."""
    if not isinstance(sd, dict) or not sd:
        raise CheckpointError(f"{where} is not a state dict (it holds {type(sd).__name__}"
                              f"{', empty' if isinstance(sd, dict) else ''})")
    bad = [k for k, v in sd.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f"{where} is not a state dict of tensors: entry {bad[0]!r} "
                              f"is {type(sd[bad[0]]).__name__}")
    bad = next((k for k, v in sd.items() if tensor_problem(v)), None)
    if bad is not None:  # (passed the checks, then start-up failed with a traceback)
        raise CheckpointError(f"{where}: {bad} {tensor_problem(sd[bad])}")
    try:
        return infer_config(sd)
    except CheckpointError as e:
        raise CheckpointError(f"{where}: {e}") from None
