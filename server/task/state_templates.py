"""Importing state files as read-only templates, exporting task states (SDK and command line).

    from server.task.state_templates import import_state, export_state
    import_state("my-state.pth", "_roleplay")     # a template every request can start from
    export_state(task, cfg, "task.state")          # the file import_state reads back

    python -m server.task.state_templates import my-state.pth --name _roleplay [--layout kv]
    python -m server.task.state_templates export TASK_… out.safetensors

The command line works on the task database (``RWKV_TASK_DB_PATH``) and reads the model's sizes
from ``RWKV_MODEL_PATH`` (memory-mapped, quick); a running server sees the new template at its
next lookup. Over HTTP: ``POST /v1/tasks/import_state?name=_x`` (file as the body) and
``GET /v1/tasks/{id}/export_state``. A template is used by ``POST /v1/tasks/_x/fork`` and by
OpenAI requests whose ``model`` is ``rwkv-7:_x``. File formats: ``server/task/state_file.py``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from server.files import write_whole
from server.task.cache_origin import state_origin
from server.task.policy import loaded_digest, other_weights
from server.task.state_file import (StateFile, StateFileError, check_lengths, check_range,
                                    check_weights, encode_state_file, read_state_file)
from server.task.task import Task

NAME = re.compile(r"_[A-Za-z0-9_.\-]{1,100}")


def template_name(name: str) -> str:
    """``name`` as a template id (a leading ``_`` is added); ValueError if it is not usable."""
    tid = name if name.startswith("_") else "_" + name
    if not NAME.fullmatch(tid):
        raise ValueError(f"template name {name!r}: use 1-100 letters, digits, '_', '.', '-'")
    return tid


def template_task(name: str, sf: StateFile, params: dict | None = None,
                  digest: str | None = None) -> Task:
    """A finished template task holding ``sf``'s state and penalties (an exported task's; zeros
    for a state-tuning file), no output; ``params``: its sampling parameters (what forks
    inherit), default the server's defaults; ``digest``: the weights digest of the model it is
    imported for (``Task.state_model``: it counts as that model's; None: unknown)."""
    task = Task(task_id=template_name(name), **(default_params() if params is None else params))
    task.state = sf.state
    task.state_model = digest
    task.history = list(sf.history)
    task.pending = list(sf.pending)  # a task exported mid-prompt: the rest of its prompt
    task.current_token = sf.current_token
    task.penalties = sf.penalties
    task.settle_finished("length")
    task.cache_origin = state_origin(sf.state, len(sf.history))
    return task


def default_params(s=None) -> dict:
    """The default sampling parameters (``RWKV_DEFAULT_*``) of settings ``s`` (default: the
    process's)."""
    if s is None:
        from server.config import settings as s  # (lazily: importing reads the environment)

    return dict(max_tokens=s.default_max_tokens, temperature=s.default_temperature,
                top_k=s.default_top_k, top_p=s.default_top_p, min_p=s.default_min_p,
                presence_penalty=s.default_presence_penalty,
                repetition_penalty=s.default_repetition_penalty,
                penalty_decay=s.default_penalty_decay)


def import_state(path, name: str, manager=None, cfg=None, layout: str = "vk") -> Task:
    """Read a state file (state tuning ``.pth`` or an exported state) and store it as the
    template ``_name``. Raises StateFileError (bad file), TemplateExists (name taken)."""
    if manager is None:
        from server.task.manager import get_task_manager

        manager = get_task_manager()
    cfg, digest = (cfg, loaded_digest(manager.loader)) if cfg else _model(manager)
    sf = read_state_file(Path(path).read_bytes(), cfg, layout)
    check_weights(sf, digest)
    if manager.loader is not None:  # (the command line has no model to run it)
        check_range(sf, manager.loader.model.dtype, manager.loader.model.state_dtype)
    from server.config import settings

    check_lengths(sf, settings.max_prompt_tokens)  # (as the route's import)
    task = template_task(name, sf, digest=digest or sf.digest)  # (a --demo CLI has none)
    manager.put_task(task.task_id, task)
    return task


def export_state(task: Task, cfg, path=None) -> bytes:
    """The state file of an idle ``task`` (its zero state if it has none); written to ``path``
    when given. ``TaskHeld`` while a scheduler holds it: its state is in a slot then (the file
    held the task's tokens with a zero or stale state; session 29's QA)."""
    from server.model.state import State

    task._check_free("exporting its state")
    state = task.state if task.state is not None else State.zeros(cfg, 1)
    meta = {"task_id": task.task_id}
    if task.state_model is not None:  # (the weights that computed it: ``check_weights``)
        meta["weights_digest"] = task.state_model
    data = encode_state_file(state, cfg, task.history, task.current_token, meta, task.pending,
                             task.penalties)
    if path is not None:
        write_whole(path, lambda tmp: tmp.write_bytes(data))
    return data


def _model(manager) -> tuple:
    """``(config, weights digest)`` of the model the states are for: the manager's loader's,
    else the server's settings' (RWKV_MODEL_PATH's checkpoint, memory-mapped, or RWKV_DEMO's
    preset: its sizes, and no digest, its weights being random)."""
    if manager.loader is not None:
        return manager.loader.cfg, loaded_digest(manager.loader)
    from server.config import settings

    if settings.demo:  # a --demo server's sizes (its weights are random, its shapes a preset's)
        from server.model.random import preset_config

        return preset_config(settings.demo), None
    from server.model.checkpoint import load_checkpoint, weights_digest

    sd, cfg = load_checkpoint(settings.model_path)
    return cfg, weights_digest(sd)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m server.task.state_templates",
                                 description="Import a state file as a template, or export a "
                                             "task's state. The task database is "
                                             "RWKV_TASK_DB_PATH's; the model's sizes are read "
                                             "from RWKV_MODEL_PATH (or RWKV_DEMO's preset), as "
                                             "the server's.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help="state file -> read-only template _NAME")
    imp.add_argument("file", help="a state-tuning .pth, or an exported state file")
    imp.add_argument("--name", required=True, help="the template's name (a leading _ is added)")
    imp.add_argument("--layout", choices=("vk", "kv"), default="vk",
                     help="time_state rows: vk = value rows (RWKV-PEFT v7, default)")
    exp = sub.add_parser("export", help="a stored task's state -> file")
    exp.add_argument("task_id")
    exp.add_argument("out", help="the file to write (an existing one: --force)")
    exp.add_argument("--force", action="store_true", help="overwrite an existing OUT")
    args = ap.parse_args(argv)
    from server.config import settings
    from server.logger import setup_logging

    setup_logging(settings.verbose)  # (the server's log format, not loguru's default)
    from server.task.manager import TaskManager, TemplateExists
    from server.task.store import TaskStoreError, beside_a_server

    if args.cmd == "export":  # (both checked before a database is opened, or made)
        if os.path.lexists(args.out) and not args.force:  # (as server.model.random's check)
            print(f"error: {args.out} exists; give --force to overwrite it", file=sys.stderr)
            return 2
        db = settings.task_db_path
        if db != ":memory:" and not os.path.exists(db):  # (a mistyped path made a new one)
            print(f"error: no task database at {db} (RWKV_TASK_DB_PATH)", file=sys.stderr)
            return 2
    try:
        with beside_a_server():  # (a running server's lock does not refuse it: see the docstring)
            manager = TaskManager()
    except TaskStoreError as e:  # not SQLite, another program's, a directory: one line
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "import":
            task = import_state(args.file, args.name, manager, layout=args.layout)
            print(f"imported {args.file} as template {task.task_id} into the task database "
                  f"{os.path.abspath(manager.store.path)} (RWKV_TASK_DB_PATH)")
        else:
            task = manager.get_task(args.task_id)
            if task is None:
                raise LookupError(f"task {args.task_id} not found")
            cfg, digest = _model(manager)
            problem = other_weights(task.state_model, digest)
            if problem:  # (as the server's export: a 409)
                raise ValueError(f"task {args.task_id} does not fit the model: {problem}")
            export_state(task, cfg, args.out)
            print(f"wrote {args.out}")
    except (StateFileError, TemplateExists, LookupError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        manager.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
