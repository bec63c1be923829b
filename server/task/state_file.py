"""State files: export a task's recurrent state, import one as a read-only template.

Two formats are read (no pickle execution: ``torch.load`` only with ``weights_only=True``):

1. **State tuning** (RWKV-PEFT ``train_type=state``): a ``.pth`` (or ``.safetensors``) holding, for
   every layer ``i``, ``blocks.{i}.att.time_state`` of shape ``[H, N, N]`` (heads x head size x head
   size), any float dtype. Our reading of the layout: RWKV-PEFT's v7 state tuning passes
   ``time_state.transpose(1, 2)`` to FLA's ``chunk_rwkv7``, whose ``initial_state`` is ``[K, V]``;
   so the saved matrix is ``[V, K]``: rows = value index, columns = key index — exactly this
   server's ``State.wkv`` layout (``S[i, j]``, row i = value). It is therefore loaded as is
   (``layout="vk"``). The ``.transpose(1, 2)`` seen in older loaders is for RWKV-5/6, whose
   inference state is ``[K, V]``; a file written in that orientation loads with ``layout="kv"``.
   The token-shift vectors start at zero, as after state tuning.
2. **Exported task state** (``encode_state_file``): the safetensors layout — an 8-byte
   little-endian header length, a JSON header, then raw little-endian tensor bytes — with tensors
   ``shift`` ``[L, 2, C]`` and ``wkv`` ``[L, H, N, N]`` and string metadata: ``format`` =
   ``rwkv-server-state``, ``version``, the model sizes, ``history`` (JSON token list: what the
   state consumed), ``current_token`` (the next input, not yet consumed; ``null`` if none) and
   ``pending`` (JSON token list, absent if empty: prompt tokens not yet consumed, fed before
   ``current_token`` — a task stopped mid-prompt); and ``penalties`` ``[V]`` (float32, absent
   for all zeros: the presence/repetition penalties of the tokens the task generated, which
   its forks inherit, so that a fork of the imported file samples as a fork of the task);
   ``weights_digest`` (absent when unknown; since session 73): the digest of the weights that
   computed the state (``Task.state_model``), so that an import on other weights is refused
   (``check_weights``) rather than stamped as the loaded model's.
   Readable with the ``safetensors`` package too.

``read_state_file`` checks every shape against the model and raises ``StateFileError`` (a
``ValueError``) with a message that names the problem. Imported states are kept in fp32.
"""

from __future__ import annotations

import io
import json
import re
import struct
import zipfile
from dataclasses import dataclass, field

import torch

from server.model.checkpoint import is_load_error, load_error_text, tensor_problem
from server.model.state import State
from server.task.policy import other_weights

FORMAT = "rwkv-server-state"
VERSION = "1"
ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
_ST_NAMES = {v: k for k, v in ST_DTYPES.items()}
_DIGEST = re.compile(r"[0-9a-f]{8,128}")  # ``checkpoint.weights_digest``'s hex digest
_TIME_STATE = re.compile(r"blocks\.(0|[1-9]\d*)\.att\.time_state")  # canonical numbers only:
# "blocks.01" beside "blocks.1" would pass a count of layers and miss the lookup (was a 500)
MAX_HEADER = 1 << 24
# tensors a state file may hold: a layer's state each (the largest published RWKV-7 has 61
# layers) and a few more. torch.load spends ~0.15 ms of CPU an entry, holding the GIL (50,000
# one-element tensors in 14 MB took ~8 s, every stream stalled): more is no state file
MAX_TENSORS = 1024
# bytes of a .pth's pickle: a torch.save state file takes ~100 bytes a tensor (~6 KB for 61
# layers). Tensors may share one storage (one zip entry), so the entry count does not bound
# them: 5 pickle bytes rebuild a tensor (an 8 MB pickle, 1.6M views: ~35 s of torch.load)
MAX_PICKLE = 64 << 10


class StateFileError(ValueError):
    """The file is not a state file, or does not fit the loaded model (message says why)."""


class StateShapeError(StateFileError):
    """A readable state file whose tensors do not fit the loaded model."""


@dataclass
class StateFile:
    state: State  # batch 1, fp32, CPU
    kind: str  # "state-tuning" | FORMAT
    history: list[int] = field(default_factory=list)
    current_token: int | None = None
    pending: list[int] = field(default_factory=list)  # prompt tokens not yet consumed
    penalties: torch.Tensor | None = None  # [V] f32 (exported states only; None: zeros)
    digest: str | None = None  # the weights that computed it (exported states; None: unknown)


# a penalty's largest magnitude in an imported state: a presence penalty of 10 and 10 for each
# of 10^8 occurrences, far past what a task accumulates, and small enough that (logits -
# penalty) / temperature stays finite in float32 at any temperature above 1e-29
MAX_PENALTY = 1e9


def check_range(sf: StateFile, dtype: torch.dtype, state_dtype: torch.dtype) -> None:
    """``StateShapeError`` unless ``sf``'s state fits a model run in ``dtype`` with its WKV
    state in ``state_dtype`` (``range_problem``)."""
    problem = range_problem(sf.state, dtype, state_dtype)
    if problem:
        raise StateShapeError(problem)


def check_lengths(sf: StateFile, limit: int) -> None:
    """``StateFileError`` when ``sf`` holds more tokens not yet consumed or of history than
    ``limit`` (``RWKV_MAX_PROMPT_TOKENS``): every fork feeds its pending tokens first and copies
    its history (which every prefill of a fork reads for the prefix cache), so both count as a
    prompt. An 8M-token history in a 16 MB file cost ~170 MB of memory a fork (session 41)."""
    for n, what in ((len(sf.pending), "prompt tokens not yet consumed"),
                    (len(sf.history), "tokens of history")):
        if n > limit:
            raise StateFileError(f"it holds {n} {what}; the limit is {limit} "
                                 "(RWKV_MAX_PROMPT_TOKENS: raise it to import this file)")


def check_weights(sf: StateFile, digest: str | None) -> None:
    """``StateShapeError`` (a 422 over HTTP) when the file's state was computed by other weights
    than those of digest ``digest`` (the loaded model's; None: unknown, as a file's without
    one). An export carried no digest before session 73 and every import was stamped as the
    loaded model's: an export moved a state onto another checkpoint of its shape (a mutation
    review)."""
    problem = other_weights(sf.digest, digest)
    if problem:
        raise StateShapeError(f"the state does not fit the loaded model: {problem}")


def wider(dtype: torch.dtype, slot: torch.dtype) -> bool:
    """Whether a floating ``dtype`` reaches past the largest value of ``slot``'s (fp32 or bf16
    into fp16): only such a tensor can hold a value its slot cannot."""
    return dtype.is_floating_point and torch.finfo(dtype).max > torch.finfo(slot).max


def range_problem(state: State, dtype: torch.dtype, state_dtype: torch.dtype) -> str | None:
    """Why ``state`` does not fit a model run in ``dtype`` with its WKV state in
    ``state_dtype`` (a value beyond float16's range became infinite in the slot, and every
    request from it got empty or garbled text with a 200), or None. Only a tensor of a wider
    type than its slot's is read."""
    for name, t, d in (("shift", state.shift, dtype), ("wkv", state.wkv, state_dtype)):
        if not wider(t.dtype, d) or not t.numel():
            continue
        top = torch.finfo(d).max
        peak = float(t.abs().max())
        if peak > top:
            return (f"the state's {name} values reach {peak:.4g}, beyond {d} (max {top:.4g}), "
                    f"which this server keeps it in: serve with "
                    f"RWKV_{'DTYPE' if name == 'shift' else 'STATE_DTYPE'}=fp32 to use it")
    return None


# ---- writing -----------------------------------------------------------------------------
def encode_state_file(state: State, cfg, history=(), current_token=None,
                      meta: dict | None = None, pending=(), penalties=None) -> bytes:
    """The exported file of a batch-1 ``state`` of a model with config ``cfg`` (``penalties``:
    the task's ``[V]`` penalties, None for zeros; written only when not all zero)."""
    tensors = {"shift": state.shift[:, :, 0], "wkv": state.wkv[:, 0]}  # [L,2,C], [L,H,N,N]
    if penalties is not None and bool(penalties.any()):
        tensors["penalties"] = penalties.float()
    info = {"format": FORMAT, "version": VERSION, "n_layer": cfg.n_layer, "n_embd": cfg.n_embd,
            "n_head": cfg.n_head, "head_size": cfg.head_size,
            "history": json.dumps([int(t) for t in history]),
            "current_token": json.dumps(current_token),
            **({"pending": json.dumps([int(t) for t in pending])} if pending else {}),
            **(meta or {})}
    header, blobs, offset = {"__metadata__": {k: str(v) for k, v in info.items()}}, [], 0
    for name, t in tensors.items():
        t = t.detach().to("cpu").contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


# ---- reading -----------------------------------------------------------------------------
def read_state_file(data: bytes, cfg, layout: str = "vk") -> StateFile:
    """Parse ``data`` (either format) for a model with config ``cfg``; see the module doc."""
    if layout not in ("vk", "kv"):
        raise StateFileError(f"layout must be 'vk' or 'kv', not {layout!r}")
    if data[8:9] != b"{" and data[:1] == b"\x80":
        # torch.load's legacy (pre-zip) format allocates each storage from its declared size
        # and fills only those the file lists: one listing none loaded uninitialised memory
        # (a template could then export heap bytes)
        raise StateFileError("a .pth in PyTorch's legacy (non-zip) format is not accepted: "
                             "load it and save it again with torch.save (PyTorch >= 1.6)")
    if data[8:9] != b"{" and data[:2] == b"PK":  # zip (torch.save)
        tensors, meta = _read_pth(data), {}
    else:
        tensors, meta = _read_safetensors(data)
    if meta.get("format") == FORMAT:
        return _exported(tensors, meta, cfg)
    if any(_TIME_STATE.fullmatch(k) for k in tensors):
        return StateFile(_from_time_state(tensors, cfg, layout), "state-tuning")
    raise StateFileError("no state in the file: expected blocks.{i}.att.time_state tensors "
                         f"(state tuning) or an exported task state; found {_keys(tensors)}")


def _keys(tensors: dict) -> str:
    names = sorted(tensors)
    return ", ".join(names[:6]) + (", ..." if len(names) > 6 else "") if names else "no tensors"


def _check_zip(data: bytes) -> None:
    """``torch.save`` stores its zip entries uncompressed, but ``torch.load`` inflates compressed
    ones into memory: a few MB of deflated zeros would become GBs. Refuse those, and entries
    whose sizes add up to more than the file."""
    if data[:2] != b"PK":
        return
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except Exception:  # BadZipFile, NotImplementedError (unknown zip version), ...
        raise StateFileError("cannot read the file as a PyTorch state file (not a readable zip "
                             "archive)") from None
    if len(infos) > MAX_TENSORS + 8:  # (torch.save adds data.pkl, version, byteorder, ...)
        raise StateFileError(f"the .pth file has {len(infos):,} entries: a state file holds a "
                             f"tensor per layer (at most {MAX_TENSORS:,} are read)")
    pickled = sum(i.file_size for i in infos if i.filename.endswith(".pkl"))
    if pickled > MAX_PICKLE:
        raise StateFileError(f"the .pth file's pickle takes {pickled:,} bytes: a state file's "
                             f"takes ~100 a tensor (at most {MAX_PICKLE:,} are read)")
    if any(i.compress_type != zipfile.ZIP_STORED for i in infos):
        raise StateFileError("the .pth file has compressed entries (torch.save writes none): "
                             "refused, as they could inflate to far more memory than the file")
    claimed = sum(i.file_size for i in infos)
    if claimed > len(data):  # (stored entries claiming more bytes than the file holds)
        raise StateFileError(f"the .pth file's entries claim {claimed:,} bytes, more than the "
                             f"file's {len(data):,}: a damaged or forged file")


def _read_pth(data: bytes) -> dict:
    _check_zip(data)
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:
        if not is_load_error(e):
            raise
        raise StateFileError(f"cannot read the file as a PyTorch state file (corrupt, or not a "
                             f"dict of tensors): {load_error_text(e)}")
    if not isinstance(obj, dict):
        raise StateFileError(f"the .pth file holds a {type(obj).__name__}, not a dict of tensors")
    bad = next((k for k, v in obj.items() if not isinstance(v, torch.Tensor)), None)
    if bad is not None:
        raise StateFileError(f"the .pth file's entry {str(bad)[:80]!r} is a "
                             f"{type(obj[bad]).__name__}, not a tensor (a state file is a dict "
                             "of tensors)")
    # a tensor saved on the "meta" device has a shape and no values (map_location leaves it
    # there): its NaN check raised a RuntimeError, a 500 (a review, session 15)
    bad = next((k for k, v in obj.items() if not isinstance(k, str) or tensor_problem(v)), None)
    if bad is not None:
        raise StateFileError(f"the .pth file is not a dict of dense tensors with values, named "
                             f"by strings (entry {str(bad)[:100]!r})")
    return obj


def _read_safetensors(data: bytes) -> tuple[dict, dict]:
    if len(data) < 8:
        raise StateFileError("the file is too short to be a state file")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(MAX_HEADER, len(data) - 8):
        raise StateFileError("not a state file: neither a PyTorch .pth nor a safetensors file")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:  # bad UTF-8 or JSON, or an integer of over 4,300 digits
        raise StateFileError(f"not a state file (bad safetensors header: {e})") from None
    except RecursionError:
        raise StateFileError("not a state file (the safetensors header is nested too deeply)") \
            from None
    if not isinstance(header, dict):
        raise StateFileError("not a state file (the safetensors header is not an object)")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict):
        raise StateFileError("not a state file (the safetensors __metadata__ is not an object)")
    if len(header) > MAX_TENSORS:
        raise StateFileError(f"the safetensors file has {len(header):,} tensors: a state file "
                             f"holds a tensor per layer (at most {MAX_TENSORS:,} are read)")
    body, entries = memoryview(data)[8 + n:], []
    for name, e in header.items():
        try:
            dtype = ST_DTYPES[e["dtype"]]
            shape = [int(s) for s in e["shape"]]
            begin, end = (int(x) for x in e["data_offsets"])
        except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: 1e999
            raise StateFileError(f"tensor {name!r}: unsupported dtype or bad header entry "
                                 f"(supported: {', '.join(ST_DTYPES)})") from None
        numel = 1
        for s in shape:
            numel *= s
        if min(shape, default=0) < 0 or not 0 <= begin <= end <= len(body) \
                or end - begin != numel * dtype.itemsize:
            raise StateFileError(f"tensor {name!r}: its bytes do not match shape {shape}")
        entries.append((begin, end, name, dtype, shape))
    _check_disjoint(entries)  # before any copy: the copies then add up to the file at most
    tensors = {}
    for begin, end, name, dtype, shape in entries:
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype) if end > begin else \
            torch.empty(0, dtype=dtype)
        try:
            tensors[name] = t.reshape(shape)
        except (TypeError, RuntimeError, OverflowError):  # [2**70, 0]: no tensor has such a shape
            raise StateFileError(f"tensor {name!r}: unsupported shape {str(shape)[:100]}") from None
    return tensors, meta


def _check_disjoint(entries: list[tuple]) -> None:
    """Tensors may not share bytes (the safetensors format forbids it). Each is copied: 300
    entries over one 1 MB span took 300 MB, and a file at the upload limit could ask for ~100 GB
    (found by a review, session 14)."""
    last_end, last = 0, None
    for begin, end, name, *_ in sorted(e for e in entries if e[1] > e[0]):
        if begin < last_end:
            raise StateFileError(f"tensors {last!r} and {name!r} share bytes (overlapping "
                                 "data_offsets)")
        last_end, last = end, name


def _check(name: str, t: torch.Tensor, want: tuple, what: str) -> torch.Tensor:
    if tuple(t.shape) != want:
        raise StateShapeError(f"{name} has shape {list(t.shape)}, the loaded model needs "
                             f"{list(want)} ({what})")
    if not t.is_floating_point():
        raise StateShapeError(f"{name} has dtype {t.dtype}, expected a float dtype")
    try:
        t = t.float()
    except RuntimeError:  # a float dtype torch cannot convert (float4_e2m1fn_x2: was a 500)
        raise StateShapeError(f"{name} has dtype {t.dtype}, which cannot be read as float32 "
                             "(use float32, float16 or bfloat16)") from None
    if not torch.isfinite(t).all():
        raise StateShapeError(f"{name} holds NaN or infinite values")
    return t


def _from_time_state(tensors: dict, cfg, layout: str) -> State:
    L, C, H, N = cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.head_size
    layers = sorted(int(m.group(1)) for k in tensors if (m := _TIME_STATE.fullmatch(k)))
    if layers != list(range(L)):
        raise StateShapeError(f"the file has time_state for layers {_ranges(layers)}; the loaded "
                             f"model has {L} layers (0-{L - 1})")
    wkv = torch.empty(L, 1, H, N, N)
    for i in range(L):
        t = _check(f"blocks.{i}.att.time_state", tensors[f"blocks.{i}.att.time_state"],
                   (H, N, N), f"{H} heads of size {N}")
        wkv[i, 0] = t if layout == "vk" else t.transpose(1, 2)
    return State(torch.zeros(L, 2, 1, C), wkv)


def _ranges(ids: list[int]) -> str:
    return f"{ids[0]}-{ids[-1]} ({len(ids)})" if ids else "none"


def _exported(tensors: dict, meta: dict, cfg) -> StateFile:
    if meta.get("version") != VERSION:
        raise StateFileError(f"unknown {FORMAT} version {meta.get('version')!r}")
    L, C, H, N = cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.head_size
    for name in ("shift", "wkv"):
        if name not in tensors:
            raise StateFileError(f"the exported state has no {name!r} tensor")
    size = f"model L{L} C{C}"
    shift = _check("shift", tensors["shift"], (L, 2, C), size)
    wkv = _check("wkv", tensors["wkv"], (L, H, N, N), size)
    try:
        history = json.loads(meta.get("history", "[]"))
        current = json.loads(meta.get("current_token", "null"))
        pending = json.loads(meta.get("pending", "[]"))
        tokens = history + pending + ([] if current is None else [current])
        if any(type(t) is not int for t in tokens):  # token ids only (not 1.5, true, "5")
            raise ValueError
    except (TypeError, ValueError, RecursionError):
        raise StateFileError("the exported state's history/pending/current_token metadata is "
                             "invalid") from None
    bad = [t for t in tokens if not 0 <= t < cfg.vocab_size]
    if bad:
        raise StateShapeError(f"the exported state's tokens include {bad[0]!r}, outside the "
                             f"model's vocabulary [0, {cfg.vocab_size})")
    penalties = None
    if "penalties" in tensors:
        penalties = _check("penalties", tensors["penalties"], (cfg.vocab_size,),
                           f"the model's vocabulary of {cfg.vocab_size} tokens")
        largest = penalties.abs().max().item()
        if largest > MAX_PENALTY:  # (finite, yet (logits - penalty) / temperature overflowed:
            # forks of such an import sampled control characters; a mutation review, session 73)
            raise StateShapeError(f"the exported state's penalties reach {largest:.3g} in "
                                 f"magnitude; at most {MAX_PENALTY:.0e} (larger ones overflow "
                                 "the sampler's logits)")
    digest = meta.get("weights_digest")
    if digest is not None and not (isinstance(digest, str) and _DIGEST.fullmatch(digest)):
        raise StateFileError("the exported state's weights_digest metadata is invalid")
    return StateFile(State(shift.unsqueeze(2), wkv.unsqueeze(1)), FORMAT, history, current,
                     pending, penalties, digest)
