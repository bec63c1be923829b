"""Where a task's state comes from, as the prefix cache names it (``task.cache_origin``).

The prefix cache (``server/scheduler/prefix_cache.py``) keys a state by its origin and the tokens
consumed since. ``task.cache_origin``:

* ``None`` (or absent): unknown — the task never uses or feeds the cache (the safe default, e.g.
  for tasks read back from the database);
* ``""``: the zero state; the task's state is exactly the zero state after ``history``
  (fresh requests, and copies of them);
* ``"state:<digest>:<n>"``: a known non-zero starting state (a template), ``<n>`` being
  the length of the history it came with (states after the same tokens from the same starting
  point are the same, whatever the template's name). ``origin_base`` gives ``<n>`` (0 for
  ``""``): where the tokens computed from that state begin, from which a split-invariant
  model's passes are cut (``Prefiller.align``).

Every template is its own origin (``origin_of``), however its state was made: an imported file,
``as_template`` of a task that generated, or a prompt prefilled from the zero state (``""``,
whose history is seldom cut where the prefix cache resumes states). Requests from a template
then share their prefixes with each other (a chat naming ``rwkv-7:_name`` resumes its previous
turns), never with requests from elsewhere.
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


def origin_base(origin: str | None) -> int:
    """The history length of ``origin``'s starting state: ``<n>`` of ``"state:<digest>:<n>"``,
    0 for the zero state (and for None)."""
    return int(origin.rsplit(":", 1)[1]) if origin else 0


def origin_of(task) -> str | None:
    """``task.cache_origin``; for a template, its own state's origin: derived from its content
    and kept on it, unless its origin is its own already (``origin_base`` its history's length,
    nothing consumed through decode steps since: ``Task.state_decoded``, as_template of a task
    that generated). A template of a fork of a template inherited that template's origin and
    now gets its own: its history is seldom where the prefix cache's cuts fall from that
    origin, and after a restart (read back without an origin) it got its own anyway. Slow for
    big states the first time (a hash of the state): call off the event loop."""
    origin = task.cache_origin
    if not task.task_id.startswith("_") or (
            origin and origin_base(origin) == len(task.history) and not task.state_decoded):
        return origin
    if task.state is None:  # the zero state, unless a history says its state was not kept
        origin = None if task.history else ""
    else:
        origin = state_origin(task.state, len(task.history))
    task.cache_origin, task.state_decoded = origin, False
    return origin
