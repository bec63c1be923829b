"""Task <-> database record without object serialization: JSON metadata + raw tensor bytes.

A record is ``(meta, blob)``. ``meta`` is a JSON object holding every scalar and token list of the
task and, under ``"tensors"``, one entry per stored tensor ``{"name", "dtype", "shape", "offset",
"nbytes"}``; ``blob`` is those tensors' bytes in the machine's order (``"byteorder"``: little
on every usual machine; a record of the other order is refused), each at a 64-byte aligned offset.
Stored tensors: ``shift`` ``[L, 2, 1, C]`` and ``wkv`` ``[L, 1, H, N, N]`` (the task's ``State``,
absent for the zero state) and ``penalties`` ``[V]`` float32 (absent for all zeros). Loading only
reads numbers and lists (``json``) and reinterprets bytes (``torch.frombuffer``): stored data can
never run code. The round trip is bit-exact for fp32, fp16 and bf16.

Only a task at rest can be stored: a ``RUNNING`` task's CPU state is the one from before it was
admitted while its token lists move on, so ``snapshot`` refuses it (``TaskBusy``); the manager
writes such a task when it finishes. A task waiting in a scheduler queue (``PREFILL``/``READY``)
is consistent and is stored with that status.

``snapshot`` is cheap (it copies token lists and keeps references to the CPU tensors, which the
engine replaces rather than modifies in place); ``Snapshot.encode`` does the byte copying, so the
writer thread, not the scheduler thread, pays for it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

import torch

from server.model.state import State
from server.task.task import SAMPLING_FIELDS, Status, Task

FORMAT_VERSION = 1
_ALIGN = 64
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class TaskBusy(RuntimeError):
    """The task is running in a scheduler; its CPU state lags its tokens, so it cannot be stored."""


class RecordError(ValueError):
    """A stored record is malformed (unknown version or dtype, sizes that do not add up)."""


@dataclass
class Snapshot:
    """A consistent copy of a task's metadata plus references to its CPU tensors."""

    task_id: str
    meta: dict
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    def encode(self) -> tuple[str, bytes]:
        """``(meta JSON, blob)``: the tensors' bytes concatenated at aligned offsets."""
        parts, entries, offset = [], [], 0
        for name, t in self.tensors.items():
            t = t.detach().to("cpu").contiguous()
            if name == "penalties" and not bool(t.any()):  # (as documented: absent for zeros;
                continue  # they were 256 KB of each row, 78 % of a tiny model's; session 41)
            if t.dtype not in _DTYPE_NAMES:
                raise TypeError(f"cannot store tensor {name} of dtype {t.dtype}")
            raw = memoryview(t.reshape(-1).view(torch.uint8).numpy())
            pad = -offset % _ALIGN
            if pad:
                parts.append(bytes(pad))
                offset += pad
            entries.append({"name": name, "dtype": _DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                            "offset": offset, "nbytes": raw.nbytes})
            parts.append(raw)
            offset += raw.nbytes
        meta = dict(self.meta, tensors=entries)
        return json.dumps(meta, separators=(",", ":")), b"".join(parts)


def snapshot(task: Task) -> Snapshot:
    """Capture ``task`` for storing. Raises ``TaskBusy`` for a RUNNING task."""
    if task.status == Status.RUNNING:
        raise TaskBusy(f"task {task.task_id} is running; it is stored when it finishes")
    meta = {
        "version": FORMAT_VERSION,
        "byteorder": sys.byteorder,  # the blob holds the tensors' bytes as they lie in memory
        "task_id": task.task_id,
        "status": int(task.status),
        "params": {k: getattr(task, k) for k in SAMPLING_FIELDS},
        "rng_counter": int(task.rng_counter),
        "current_token": task.current_token,
        "pending": list(task.pending),
        "history": list(task.history),
        "output": list(task.output),
        "round_lead": list(task.round_lead),
        "unpopped": task._unpopped,
        "finish_reason": task.finish_reason,
        "error": task.error,
        "stop_at_turn": task.stop_at_turn,
        "state_model": task.state_model,
        "prefill_time": task.prefill_time,
        "gen_time": task.gen_time,
        "created": task.created,
        "finished_at": task.finished_at,
    }
    tensors = {}
    if task.state is not None:
        tensors["shift"] = task.state.shift  # [L, 2, 1, C]
        tensors["wkv"] = task.state.wkv  # [L, 1, H, N, N]
    if task.penalties is not None:
        tensors["penalties"] = task.penalties  # [V] f32
    return Snapshot(task.task_id, meta, tensors)


def encode_task(task: Task) -> tuple[str, bytes]:
    """``(meta JSON, blob)`` for ``task`` (see the module docstring)."""
    return snapshot(task).encode()


def decode_tensors(meta: dict, blob: bytes | None) -> dict[str, torch.Tensor]:
    """The tensors described by ``meta["tensors"]``, read from ``blob`` (one copy; bytes only)."""
    entries = meta.get("tensors") or []
    if not entries:
        return {}
    if meta.get("byteorder", "little") != sys.byteorder:
        raise RecordError(f"record is {meta.get('byteorder')}-endian, "
                          f"this machine is {sys.byteorder}")
    buf = bytearray(blob or b"")  # writable, shared by the returned tensors
    out = {}
    for e in entries:
        dtype = DTYPES.get(e.get("dtype"))
        if dtype is None:
            raise RecordError(f"tensor {e.get('name')!r} has unknown dtype {e.get('dtype')!r}")
        shape = [int(s) for s in e["shape"]]
        numel = 1
        for s in shape:
            numel *= s
        off, nbytes = int(e["offset"]), int(e["nbytes"])
        if nbytes != numel * dtype.itemsize or off < 0 or off + nbytes > len(buf):
            raise RecordError(f"tensor {e['name']!r}: {nbytes} bytes at {off} do not fit "
                              f"shape {shape} {e['dtype']} in a {len(buf)}-byte blob")
        t = torch.frombuffer(buf, dtype=dtype, count=numel, offset=off) if numel else \
            torch.empty(0, dtype=dtype)
        out[e["name"]] = t.reshape(shape)
    return out


def decode_task(meta_json: str | dict, blob: bytes | None, task_id: str | None = None,
                tokenizer=None, tensors: bool = True) -> Task:
    """Rebuild a Task from a record; ``task_id`` (the row's key) overrides the stored one.
    ``tensors=False`` reads the metadata only (the task gets no state: for listings)."""
    meta = json.loads(meta_json) if isinstance(meta_json, str) else meta_json
    if meta.get("version") != FORMAT_VERSION:
        raise RecordError(f"unknown task record version {meta.get('version')!r}")
    params = {k: v for k, v in meta["params"].items() if k in SAMPLING_FIELDS}
    task = Task(task_id=task_id or meta["task_id"], tokenizer=tokenizer, **params)
    task.status = Status(meta["status"])
    task.rng_counter = int(meta["rng_counter"])
    task.current_token = meta["current_token"]
    task.pending = [int(t) for t in meta["pending"]]
    task.history = [int(t) for t in meta["history"]]
    task.output = [int(t) for t in meta["output"]]
    task.round_lead = [int(t) for t in meta.get("round_lead", ())]  # (absent: a record before it)
    task._unpopped = min(int(meta.get("unpopped", 0)), len(task.output))
    task.finish_reason = meta["finish_reason"]
    task.stop_at_turn = bool(meta.get("stop_at_turn", True))  # (absent: a record before it)
    task.state_model = meta.get("state_model")  # (absent: a record before session 67)
    task.error = meta["error"]
    task.prefill_time = float(meta["prefill_time"])
    task.gen_time = float(meta["gen_time"])
    task.created = float(meta["created"])
    task.finished_at = meta["finished_at"]
    if task.status == Status.FINISHED:
        task._done.set()  # wait() returns at once, as for a task that finished here
    if not tensors:
        return task
    data = decode_tensors(meta, blob)
    if ("shift" in data) != ("wkv" in data):
        raise RecordError("record holds only half of a state (shift and wkv go together)")
    if "shift" in data:
        task.state = State(data["shift"], data["wkv"])
    task.penalties = data.get("penalties")
    return task
