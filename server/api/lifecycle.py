"""Start-up and shut-down of the serving runtime: model, scheduler daemon, task store.

``build_runtime(settings)`` loads the model (or, with ``settings.demo``, random weights of that
preset made in memory and checked and loaded by the same loader), starts the
``DynamicScheduler`` daemon and opens the ``TaskManager``. ``close_runtime`` stops generation,
flushes and closes the store and frees the device.
"""

from __future__ import annotations

import gc
import os
import time

from server.api.deps import Runtime
from server.logger import get_logger
from server.model.memory import describe, device_memory

log = get_logger("api")


class StartupError(RuntimeError):
    """A start-up that a setting must change for (the warm-up out of GPU memory): the message
    says which. The operator's error, not a bug: one line, no traceback (``operator_error``)."""


EXIT_OPERATOR_ERROR = 2  # run.py's status for every start-up error of the operator's
EXIT_TASKS_LOST = 1  # run.py's status after a shutdown that lost tasks the database refused


def operator_error(e: BaseException) -> str | None:
    """The one line to log for an error of the operator's found while building the runtime (a
    bad checkpoint, an unusable task database, settings that do not fit the GPU): its message
    says what is wrong and what to do, and a traceback would bury it. None for anything else
    (a bug: its traceback is logged)."""
    from server.model.checkpoint import CheckpointError, is_out_of_memory, load_error_text
    from server.task.store import TaskStoreError

    if isinstance(e, CheckpointError):  # says what is wrong and where models come from
        return f"Cannot load the model: {e}"
    if isinstance(e, (TaskStoreError, StartupError)):  # names the file or the settings
        return f"Cannot start: {e}"
    if is_out_of_memory(e):  # the model (with its slots and cache) does not fit the device
        return (f"Cannot start: out of memory loading the model ({load_error_text(e)}): use a "
                "smaller model, RWKV_DTYPE=bf16 or fp16, a smaller RWKV_MAX_BATCH_SIZE or "
                "RWKV_STATE_CACHE_MB, or another RWKV_DEVICE")
    return None


def demo_state_dict(preset: str, device) -> dict:
    """Random weights of ``preset`` in the published layout (bf16, on the CPU as a loaded
    checkpoint's are), drawn on ``device`` one tensor at a time: on a GPU the 2.9B preset takes
    seconds where the CPU's generator took most of a ~100 s start (session 16). The values
    depend on the device's generator (gibberish either way)."""
    from server.model.random import PRESETS, make_random_state_dict

    if preset not in PRESETS:
        raise SystemExit(f"Unknown demo preset {preset!r}; choose one of {', '.join(PRESETS)}")
    return make_random_state_dict(*PRESETS[preset], device=device, to="cpu")


def load_model(settings):
    """The ``RWKV070ModelLoader`` for the settings (demo: random weights, logged as such)."""
    from server.model.loader import RWKV070ModelLoader

    auto = lambda v: None if v == "auto" else v  # noqa: E731 - the loader picks the default
    kw = dict(device=auto(settings.device), dtype=auto(settings.dtype),
              state_dtype=auto(settings.state_dtype), fused=None if settings.fused else False,
              split_invariant=settings.split_invariant,
              prefill_tokens=settings.prefill_tokens)
    if not settings.demo:
        log.info(f"Loading model {settings.model_path}")
        return RWKV070ModelLoader(settings.model_path, settings.vocab_path, **kw)
    log.warning(f"DEMO MODE: serving RANDOM weights of preset '{settings.demo}' — the output is "
                "gibberish; set RWKV_MODEL_PATH (or --model) to serve a real RWKV-7 checkpoint")
    from server.model.loader import parse_device

    sd = demo_state_dict(settings.demo, parse_device(kw["device"]))
    # named as the file it stands for ("rwkv7-demo-2.9b"; without ".pth" the stem would cut at
    # the preset's dot)
    return RWKV070ModelLoader(f"rwkv7-demo-{settings.demo}.pth", settings.vocab_path,
                              state_dict=sd, **kw)


def open_manager(settings, loader):
    from server.task.manager import TaskManager

    path = settings.task_db_path
    where = path if path == ":memory:" else os.path.abspath(path)
    tm = TaskManager(db_path=path, capacity=settings.task_default_cpu_capacity,
                     max_db_size=settings.task_db_max_size, max_db_mb=settings.task_db_max_mb,
                     queue_size=settings.task_async_queue_size, loader=loader)
    counts = tm.unless_damaged(lambda: (tm.store.count(templates=False),
                                        tm.store.count(templates=True)), None)
    held = ("DAMAGED (its readable rows are served; /health says degraded)" if counts is None
            else f"{counts[0]} stored tasks and {counts[1]} templates")
    log.info(f"Task database {where}: {held} (kept: "
             f"{tm.writer.limits}, the oldest pruned)")
    warn_unfit_templates(tm, loader)
    return tm


def warn_unfit_templates(tm, loader) -> None:
    """A warning naming the stored templates the loaded model cannot serve (another model's
    shapes or weights, values beyond its dtypes: a server restarted on another checkpoint), so
    an operator learns of them at start rather than from a client's 409. (No loader: no model
    to check them against.)"""
    if loader is None:
        return
    every = tm.template_ids()
    fit = set(tm.template_ids(loader.cfg))
    unfit = [tid for tid in every if tid not in fit]
    if unfit:
        shown = ", ".join(unfit[:5]) + (", ..." if len(unfit) > 5 else "")
        log.warning(f"{len(unfit)} of {len(every)} stored templates do not fit the loaded model "
                    f"({shown}): another model's shapes or weights, or values beyond its "
                    "dtypes; they are not served (GET /v1/tasks/ID/status reads one, "
                    "POST /v1/tasks/ID/delete?force=true removes it)")


def make_prefix_cache(settings, loader):
    """The prefix state cache (``RWKV_STATE_CACHE_MB``; 0 = none), a share of it on the GPU.
    None too when the limit cannot hold one state of the model (with a warning): such a cache
    would store nothing yet still cost prefill its checkpoint stops and boundary passes."""
    from server.scheduler.prefix_cache import ENTRY_OVERHEAD, MIN_TOKENS, PrefixCache, state_nbytes

    total = settings.state_cache_mb << 20
    if total <= 0:
        return None
    state = loader.model.new_state(1)
    one = state_nbytes(state) + ENTRY_OVERHEAD + 4 * MIN_TOKENS
    if total < one:
        log.warning(f"Prefix state cache OFF: RWKV_STATE_CACHE_MB={settings.state_cache_mb} "
                    f"cannot hold one state of this model ({one / 2**20:.1f} MB); raise it to "
                    "use the cache")
        return None
    device = loader.model.device
    share = settings.state_cache_device_fraction if device.type != "cpu" else 1.0
    log.info(f"Prefix state cache: {settings.state_cache_mb} MB ({share:.0%} on {device})")
    # (RWKV_PREFILL_CHUNK is at least any WKV chunk: config.py; the cuts keep the bits)
    cache = PrefixCache(total, device, device_bytes=int(total * share),
                        vocab=loader.cfg.vocab_size)  # (a row's room for a prompt's logits)
    cache.reserve_host(state)  # the host tier's pinned rows (CUDA)
    return cache


def warm_up(scheduler, max_batch_size: int) -> None:
    """Compile the kernels and capture every decode and prefill graph before serving. Running
    out of GPU memory here stops the start with what to change, not a bare CUDA error."""
    import torch

    t0 = time.perf_counter()
    try:
        caps = scheduler.engine.capture_graphs(max_batch_size)
    except torch.OutOfMemoryError as e:
        raise StartupError(
            f"warm-up ran out of GPU memory holding {max_batch_size} slots and capturing their "
            "graphs: lower RWKV_MAX_BATCH_SIZE (or RWKV_STATE_DTYPE=fp16), or set "
            "RWKV_WARMUP=false to allocate on demand") from e
    t1 = time.perf_counter()
    runs = scheduler.engine.warm_requests()
    log.info(f"Warm-up: kernels compiled, {len(caps)} decode graphs and the prefill graphs "
             f"captured in {t1 - t0:.1f} s; {runs} throwaway requests (each sampling and "
             f"prefill variant) in {time.perf_counter() - t1:.1f} s; GPU memory: "
             f"{describe(device_memory(scheduler.engine.device, wait=True))}")


def build_runtime(settings) -> Runtime:
    """Load the model, start the scheduler daemon, open the task store."""
    from server.scheduler import DynamicScheduler

    loader = load_model(settings)
    scheduler = DynamicScheduler(loader, settings.max_batch_size, settings.buffer_size,
                                 prefill_chunk=settings.prefill_chunk or None,  # (by device)
                                 max_queue=settings.max_queue,
                                 prefix_cache=make_prefix_cache(settings, loader))
    scheduler.admit_wait = settings.admit_wait_steps
    scheduler.engine.copyback.budget = settings.copyback_mb << 20
    if settings.warmup and loader.model.device.type == "cuda":
        warm_up(scheduler, settings.max_batch_size)
    scheduler.start_daemon()
    try:
        manager = open_manager(settings, loader)
        manager.set_dependencies(loader, scheduler.sampler)
    except BaseException:
        scheduler.shutdown()
        raise
    return Runtime(settings=settings, loader=loader, scheduler=scheduler, manager=manager)


def freeze_heap() -> int:
    """Collect, then move every object made so far to the collector's permanent generation
    (``gc.freeze``); returns how many. A served process holds ~300,000 tracked objects from its
    start (the tokenizer's trie of dicts, the model's modules, the app's routes), and every
    full collection walked them all: 163.7 ms in a served tiny model's process on a 2-core
    CPU, 2.1 ms once frozen (``python -m server.bench.http_stages --turns 3 [--no-freeze]``,
    which times one at its end; docs/performance.md, session 13). A
    ~190 ms stall of one request in most runs of ``server.bench.http_stages`` on the GPU
    machine is probably one (not checked there). Frozen, they are never walked (start-up
    objects live as long as the process); ``gc.unfreeze`` at shutdown hands them back, so
    that a closed runtime's cycles are collected."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def close_runtime(rt: Runtime) -> list[str]:
    """Stop generation, flush and close the task store, free the device. Returns the ids of
    the tasks the database refused to the end (lost with the process; ``close`` logged them)."""
    log.info("Shutting down: stopping generation")
    rt.scheduler.shutdown()
    try:
        rt.manager.flush()
    finally:
        rt.manager.close()
    lost = rt.manager.writer.unsaved
    device = getattr(rt.loader.model, "device", None)
    rt.loader = rt.scheduler = None
    gc.collect()
    if device is not None and str(device).startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
    log.info("Shutdown complete")
    return lost
