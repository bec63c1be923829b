"""Starting tasks from a template's state (``start_all``): the OpenAI routes' requests that
name a template (``rwkv-7:_name``, ``server/api/prefix.py``). Each task shares the template's
state tensors (never written: the engine gives a task new ones), takes its history and feeds
its not yet fed tokens before its own prompt; in a CUDA process the state is first copied
once into pinned memory, kept on the template, so that slots load it at the host link's speed.
"""

from __future__ import annotations

import torch

from server.logger import get_logger
from server.model.state import State
from server.task.cache_origin import origin_of

log = get_logger(__name__)


def start_all(tpl, tasks: list) -> str:
    """Start every task from ``tpl`` (fresh tasks, a finished template: nothing else touches
    them meanwhile); returns the template's cache origin. The first time for a template state
    it hashes the state (``origin_of``) and, on CUDA, pins a copy (``load_ready``): at 2.9B
    tens of milliseconds, run off the event loop; then ``tpl._started_from`` is that state,
    and later requests start inline (a thread's two hand-overs saved)."""
    origin = origin_of(tpl)  # first: it may settle the template's state_decoded
    for task in tasks:
        start_from(task, tpl)
    if pin_settled(tpl):  # (not after a failed pin: each request tries again, off the loop)
        tpl._started_from = tpl.state
    return origin


def pin_settled(tpl) -> bool:
    """Whether ``load_ready(tpl)`` returns without trying to pin: no state, a process that has
    not started CUDA, or the pinned copy of this state made."""
    kept = tpl._pinned
    return tpl.state is None or not torch.cuda.is_initialized() or (
        kept is not None and kept[0] is tpl.state)


def start_from(task, tpl) -> None:
    """Put ``tpl``'s state and consumed tokens under ``task``'s not yet fed prompt. The state is
    shared, not copied: nothing writes into a task's state tensors (the engine loads them into
    a slot and gives the task new ones when it is done: ``policy.signature``). A copy cost a
    request from a template 16-18 ms at 2.9B on the 2-core machine, before its first token
    (docs/experiments/session37/clone_cost.py)."""
    task.pending = tpl.unfed() + task.pending
    task.history = list(tpl.history)
    task.state = load_ready(tpl)
    task.state_model = tpl.state_model
    task.state_decoded = tpl.state_decoded


def load_ready(tpl):
    """``tpl.state`` as its requests start from it: in a process that uses CUDA (a CUDA
    server: its model is there), a copy in pinned memory, made once and kept on the template
    (not stored), so that a slot loads it at the host link's speed (pageable memory is copied
    through a staging buffer, and the copy waits for it). Not in a CPU server on a machine
    with a GPU: pinning would start a CUDA context there."""
    st = tpl.state
    if not pin_settled(tpl):  # (no copy yet, or the template's state was replaced)
        try:
            tpl._pinned = (st, State(st.shift.pin_memory(), st.wkv.pin_memory()))
        except RuntimeError as e:  # (no pinned memory to be had): the request goes on from
            # the pageable state, a slower load, not a failed request
            log.warning(f"Pinning template {tpl.task_id}'s state failed, using it as it is: {e}")
            return st
    kept = tpl._pinned
    return kept[1] if kept is not None and kept[0] is st else st
