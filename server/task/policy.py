"""Task id policy, the "busy" test, content signatures and the TaskManager's exceptions.

Ids: ``_…`` templates (read-only, kept for ever), ``TMP…`` temporary (never written), anything
else persistent (``TASK_…``).
"""

from __future__ import annotations

import re
import weakref

from server.task.task import SAMPLING_FIELDS, Task

# ids a task may be stored under: they appear in URL paths (/v1/tasks/<id>/...) and in the
# database; what the server makes (``TASK_<hex>``, ``TMP_<hex>``, template names) all fit
# (not dots alone: a client normalises /v1/tasks/./status to /v1/tasks/status)
TASK_ID = re.compile(r"(?!\.+$)[A-Za-z0-9_.\-]{1,128}")


class TaskNotFound(LookupError):
    """No task with that id in memory or in the database."""


class TemplateProtected(PermissionError):
    """Templates are read-only: deleting one needs ``force=True``."""


class TemplateExists(TemplateProtected):
    """A template with that id exists; templates are never overwritten."""


class TaskUnreadable(RuntimeError):
    """A stored record that cannot be decoded (another version's, damaged): it can only be
    deleted."""


class TooManyTemplates(RuntimeError):
    """``put_task``'s ``max_templates`` templates are stored (or being stored) already."""


def check_id(task_id) -> None:
    """``TypeError`` unless ``task_id`` is a str, ``ValueError`` unless it fits ``TASK_ID``."""
    if not isinstance(task_id, str):
        raise TypeError(f"a task id is a str, not {type(task_id).__name__}")
    if not TASK_ID.fullmatch(task_id):
        raise ValueError(f"task id {task_id[:60]!r}: use 1-128 letters, digits, '_', '.', '-', "
                         "not dots alone (it appears in URL paths)")


def is_template_id(task_id: str) -> bool:
    return task_id.startswith("_")


def is_temporary_id(task_id: str) -> bool:
    """``TMP`` (an SDK Task's default id) or ``TMP_…`` (API.md: ``TMP_<32 hex>``): never
    written to the database. Any other id is stored, ``TMPL_notes`` too (it was never kept)."""
    return task_id == "TMP" or task_id.startswith("TMP_")


def is_busy(task: Task) -> bool:
    """True while a scheduler holds the task (``Task.held``)."""
    return task.held


def model_mismatch(task: Task, cfg, digest: str | None = None) -> str | None:
    """Why ``task``'s state, penalties or next input tokens do not fit a model of config ``cfg``
    (a task stored while the server ran another model) and, given the model's weights
    ``digest``, why its state is another model's (``other_weights``), or None when they fit."""
    shapes = {} if task.state is None else {"shift": task.state.shift.shape,
                                             "wkv": task.state.wkv.shape}
    if task.penalties is not None:
        shapes["penalties"] = task.penalties.shape
    # (shapes first: another model's shapes say more than its weights' digest)
    # state_unfit: values beyond the server's dtypes (TaskManager.get_task)
    return shapes_mismatch(shapes, task.unfed(), cfg) or task.state_unfit or (
        None if task.state is None else other_weights(task.state_model, digest))


def other_weights(stamp: str | None, digest: str | None) -> str | None:
    """Why a state stamped with the weights digest ``stamp`` (``Task.state_model``) cannot run
    on a model whose weights digest is ``digest``: another checkpoint computed it, and its
    replies would be neither model's, with a 200. None for the same weights, or either unknown
    (a state stored before session 67; a loader without a digest)."""
    if stamp is None or digest is None or stamp == digest:
        return None
    return (f"its state was computed by other weights (digest {stamp}; the loaded "
            f"checkpoint's is {digest}): a state belongs to the model that made it; prefill "
            "its prompt again on this model")


def loader_mismatch(task: Task, loader) -> str | None:
    """``model_mismatch`` of ``task`` against ``loader``'s model: its shapes and its weights."""
    return model_mismatch(task, loader.cfg, loaded_digest(loader))


def loaded_digest(loader) -> str | None:
    """The weights digest of ``loader``'s model (``checkpoint.weights_digest``), or None."""
    return getattr(loader, "digest", None)


def stored_mismatch(meta: dict, cfg, digest: str | None = None) -> str | None:
    """``model_mismatch`` of a stored record's JSON meta (``serialize``), its tensors unread."""
    shapes = {t["name"]: t["shape"] for t in meta.get("tensors", ())}
    cur = meta.get("current_token")
    problem = shapes_mismatch(shapes, list(meta.get("pending", ())) +
                              ([] if cur is None else [cur]), cfg)
    if problem is None and "shift" in shapes:  # (a state held: whose weights made it)
        problem = other_weights(meta.get("state_model"), digest)
    return problem


def shapes_mismatch(shapes: dict, ids: list[int], cfg) -> str | None:
    """Why tensors of these shapes (``shift``, ``wkv``, ``penalties``; absent: not held) and
    these next input tokens do not fit a model of config ``cfg``, or None."""
    L, C, H, N = cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.head_size
    for name, want in (("shift", (L, 2, 1, C)), ("wkv", (L, 1, H, N, N))):
        if name in shapes and tuple(shapes[name]) != want:
            return (f"its state's {name} has shape {list(shapes[name])}, the loaded model's "
                    f"is {list(want)}")
    if "penalties" in shapes and tuple(shapes["penalties"]) != (cfg.vocab_size,):
        return (f"its penalties have shape {list(shapes['penalties'])}, the loaded model's "
                f"vocabulary has {cfg.vocab_size} tokens")
    if ids and not 0 <= min(ids) <= max(ids) < cfg.vocab_size:
        bad = next(t for t in ids if not 0 <= t < cfg.vocab_size)
        return (f"its next tokens lie outside the loaded model's vocabulary [0, {cfg.vocab_size})"
                f" (token id {bad})")
    return None


def signature(task: Task) -> tuple:
    """Changes whenever a Task method changes what would be stored (tensors by identity:
    the engine replaces a task's CPU tensors, it never writes into them)."""
    st = task.state
    tensors = (None, None) if st is None else (st.shift, st.wkv)
    refs = tuple(None if t is None else weakref.ref(t) for t in (*tensors, task.penalties))
    return (int(task.status), task.finished_at, task.finish_reason, task.rng_counter,
            task.current_token, len(task.pending), len(task.history), len(task.output),
            tuple(getattr(task, k) for k in SAMPLING_FIELDS), refs)


def same_content(a: tuple | None, b: tuple) -> bool:
    if a is None or a[:-1] != b[:-1]:
        return False
    return all((x is None and y is None) or (x is not None and y is not None and x() is y())
               for x, y in zip(a[-1], b[-1]))
