"""Where a task's state comes from, as the prefix cache names it (``task.cache_origin``).

The prefix cache (``server/scheduler/prefix_cache.py``) keys a state by its origin and the tokens
consumed since. ``task.cache_origin``:

* ``None`` (or absent): unknown — the task never uses or feeds the cache (the safe default, e.g.
  for tasks read back from the database);
* ``""``: the zero state; the task's state is exactly the zero state after ``history``
  (fresh requests, and copies of them);
* ``"state:<digest>:<n>"``: a known non-zero starting state (an imported template), ``<n>`` being
  the length of the history it came with (states after the same tokens from the same starting
  point are the same, whatever the template's name).
"""

from __future__ import annotations

import hashlib

import torch

from server.model.state import State


def state_digest(state: State) -> str:
    """A content hash of a state (its bytes, as stored)."""
    h = hashlib.blake2b(digest_size=16)
    for t in (state.shift, state.wkv):
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def state_origin(state: State, n_history: int) -> str:
    """The origin of tasks starting from ``state`` that came with ``n_history`` tokens."""
    return f"state:{state_digest(state)}:{n_history}"


def origin_of(task) -> str | None:
    """``task.cache_origin``; for a template without one, or whose state consumed tokens
    through decode steps (``Task.state_decoded``: as_template of a task that generated), derived
    from its content and kept on it — the state is then its own starting point, nothing of it
    decoded since. Slow for big states the first time (a hash of the state): call off the
    event loop."""
    origin = getattr(task, "cache_origin", None)
    if not task.task_id.startswith("_") or (origin is not None and not task.state_decoded):
        return origin
    if task.state is None:  # the zero state, unless a history says its state was not kept
        origin = None if task.history else ""
    else:
        origin = state_origin(task.state, len(task.history))
    task.cache_origin, task.state_decoded = origin, False
    return origin
