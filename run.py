"""Start RWKV-Server: ``python run.py`` (settings from ``RWKV_*`` variables, see server/config.py).

    python run.py                          # serve RWKV_MODEL_PATH on 0.0.0.0:8000
    python run.py --model path/to/rwkv7.pth --port 8080
    python run.py --demo                   # random weights (preset tiny): try the API without a model
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys

GRACEFUL_SHUTDOWN_S = 10


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="run.py", description="RWKV-Server: batched RWKV-7 inference with an OpenAI-compatible "
        "API and a Task API. Every option overrides its RWKV_* environment variable.",
        epilog="Every other setting (device, dtypes, batch size, buffer size, prefix cache, "
        "warm-up, API key, limits ...) is an RWKV_* environment variable: the table in README.md "
        "lists them with their defaults.")
    ap.add_argument("--model", metavar="PATH", help="RWKV-7 .pth checkpoint (RWKV_MODEL_PATH)")
    ap.add_argument("--host", help="address to listen on (RWKV_HOST, default 0.0.0.0)")
    ap.add_argument("--port", type=int, help="port to listen on (RWKV_PORT, default 8000)")
    ap.add_argument("--demo", nargs="?", const="tiny", metavar="PRESET",
                    help="serve RANDOM weights of PRESET (tiny, 0.1b, 0.4b, 1.5b, 2.9b, 7.2b, "
                         "13.3b; default tiny) to try the API without a model (RWKV_DEMO)")
    args = ap.parse_args(argv)
    if args.demo is not None and args.model is not None:  # (the demo was served, --model unread)
        ap.error("--model and --demo exclude each other (--demo serves random weights)")
    return args


def apply_overrides(args: argparse.Namespace) -> None:
    """Command-line options become RWKV_* variables before the settings are read. ``--model``
    and ``--demo`` each override the other's variable too (the option names the weights)."""
    for name, value in (("MODEL_PATH", args.model), ("HOST", args.host), ("PORT", args.port),
                        ("DEMO", args.demo)):
        if value is not None:
            os.environ[f"RWKV_{name}"] = str(value)
    for given, other in ((args.model, "RWKV_DEMO"), (args.demo, "RWKV_MODEL_PATH")):
        if given is not None:
            os.environ.pop(other, None)


def _cuda_configured(device: str) -> bool:
    """Whether the server will run on CUDA (``auto``: where torch finds a GPU)."""
    if device == "auto":
        import torch

        return torch.cuda.is_available()
    return device.startswith("cuda")


def _device_problem(device: str) -> str | None:
    """Why the configured CUDA device cannot be used (None: it can, or it is not CUDA): one
    line at start, not a traceback from the model's first tensor (a review, session 14)."""
    if not device.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return "CUDA is not available here (no GPU, driver or CUDA build of torch); use cpu"
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        return f"there are {torch.cuda.device_count()} CUDA devices (0-based index)"
    return None


def main(argv=None) -> None:
    apply_overrides(parse_args(argv))
    from server.config import cuda_defaults  # (no torch: before any CUDA allocation)

    defaults = cuda_defaults(os.environ)
    from server.config import settings  # read after the overrides; exits on bad values
    from server.logger import get_logger, setup_logging

    setup_logging(settings.verbose)
    log = get_logger("api")
    if defaults and _cuda_configured(settings.device):
        log.info(" ".join(f"{k}={v}" for k, v in defaults.items()) + " (the server's defaults; "
                 "set a variable to choose)")
    from server.config import unknown_variables

    for note in unknown_variables(os.environ):
        log.warning(note)
    problem = _device_problem(settings.device)
    if problem:
        log.error(f"RWKV_DEVICE={settings.device}: {problem}")
        sys.exit(2)
    from server.model.tokenizer import vocab_problem

    problem = vocab_problem(settings.vocab_path)  # before the model loads (minutes, GBs)
    if problem:
        log.error(f"RWKV_VOCAB_PATH: tokenizer vocabulary {problem} (the repository's "
                  "eof_v20230424.txt is the default)")
        sys.exit(2)
    if settings.demo:
        from server.model.presets import PRESETS  # (no torch: fails at once)

        if settings.demo not in PRESETS:
            log.error(f"Unknown demo preset {settings.demo!r}; choose one of "
                      f"{', '.join(PRESETS)}")
            sys.exit(2)
    elif os.path.isdir(settings.model_path):
        log.error(f"RWKV_MODEL_PATH / --model: {settings.model_path} is a directory; name the "
                  "checkpoint file in it (an RWKV-7 .pth)")
        sys.exit(2)
    elif os.path.exists(settings.model_path) and not os.path.isfile(settings.model_path):
        log.error(f"RWKV_MODEL_PATH / --model: {settings.model_path} is not a regular file "
                  "(a device or a pipe); name the checkpoint file (an RWKV-7 .pth)")
        sys.exit(2)
    elif not os.path.isfile(settings.model_path) and not _search_denied(settings.model_path):
        from server.model.checkpoint import WHERE_MODELS_COME_FROM

        log.error(f"Model file not found: {settings.model_path}. {WHERE_MODELS_COME_FROM}. "
                  "Or try the API with random weights: uv run python run.py --demo")
        sys.exit(2)
    else:  # a file that is no RWKV-7 checkpoint: one line now, not a start-up traceback later
        from server.model.checkpoint import CheckpointError, load_checkpoint

        try:
            load_checkpoint(settings.model_path)  # memory-mapped: reads the layout, not the weights
        except CheckpointError as e:
            log.error(f"Cannot load the model: {e}")
            sys.exit(2)

    check_port(settings.host, settings.port, log)  # before the model loads (minutes, GBs)
    checked = check_task_db(settings.task_db_path, log)  # (the same)
    try:  # its hold on the file's lock is kept until the server is done with the file
        serve(settings)
    finally:
        try:
            checked.close()
        except Exception as e:  # (a full disk at exit: the server's own store said so)
            log.warning(f"Closing the task database: {e}")


def serve(settings) -> None:
    """Serve until stopped: the app under uvicorn, with run.py's drain and exit statuses."""
    import uvicorn

    from server.api.app import create_app
    from server.api.http_protocol import DrainingServer, with_header_timeout
    from server.api.lifecycle import EXIT_TASKS_LOST
    from server.logger import get_logger

    app = create_app(settings, freeze_heap=True)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None,
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                            http=with_header_timeout(settings.header_timeout_s))
    server = DrainingServer(config, on_exit=app.state.drain.begin, lost=lambda: _lost(app))
    logging.getLogger("uvicorn.error").addFilter(QuietOperatorError(app))
    # uvicorn takes the signals over from here (restoring this handler when it stops)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:  # as uvicorn.run: Ctrl-C comes back as KeyboardInterrupt once the server has stopped
        server.run()
    except KeyboardInterrupt:
        pass
    except SystemExit:  # uvicorn's status (3) for any failed start
        if _startup_exit_code(app) is None:
            if not server.started:  # a port taken while the model loaded (the probe before
                # found it free): the probe's line and the operator's status, not uvicorn's
                check_port(settings.host, settings.port, get_logger("api"))
            raise
    if not server.started:  # the start failed (logged): the operator's error is 2, as the
        # checks above; uvicorn's status for anything else
        sys.exit(_startup_exit_code(app) or 3)
    if _lost(app):  # (the store's close logged which); not the signal's clean stop
        get_logger("api").error(
            f"Exiting with status {EXIT_TASKS_LOST}: {len(app.state.lost_at_exit)} tasks "
            "could not be saved to the task database")
        sys.exit(EXIT_TASKS_LOST)


def _lost(app) -> bool:
    """Whether the app's shutdown lost tasks the task database refused to the end."""
    return bool(getattr(app.state, "lost_at_exit", None))


def _startup_exit_code(app) -> int | None:
    """The exit status the app's start-up recorded for an error of the operator's (a bad
    checkpoint found while the model loads: its lifespan logged the one line); None if none."""
    return getattr(app.state, "startup_exit_code", None)


class QuietOperatorError(logging.Filter):
    """Drops uvicorn's error lines about a start-up that failed on the operator's error, once
    the app's lifespan has logged the error's one line (and recorded ``startup_exit_code``):
    the error's traceback, which starlette hands uvicorn as the failure's text, and
    "Application startup failed. Exiting.". Any other failure (a bug) keeps its traceback."""

    def __init__(self, app):
        super().__init__()
        self.app = app

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR or _startup_exit_code(self.app) is None


def _search_denied(path: str) -> bool:
    """True if ``path`` cannot be looked at for want of permission (a folder above it that this
    user may not search): not "not found"; load_checkpoint says permission denied."""
    try:
        os.stat(path)
    except PermissionError:
        return True
    except OSError:
        pass
    return False


def check_task_db(path: str, log):
    """Exit with one line if the task database cannot be opened (not SQLite, damaged header,
    another program's table, a directory, not writable, another server's): the server's store
    opens only after the model has loaded. Opening makes a missing file, as the server would.
    Returns the open store, for the caller to close once the server is done: until then it
    holds the file's lock (``store_guard.claim``: shared with this process's later stores), so a
    second server started while this one loads its model is refused before loading its own."""
    from server.task.store import TaskStore, TaskStoreError

    if path == ":memory:":
        log.warning("RWKV_TASK_DB_PATH is :memory:: tasks and templates are not saved, a restart "
                    "loses them")
    try:
        return TaskStore(path)
    except TaskStoreError as e:
        log.error(f"Cannot start: {e}")
        sys.exit(2)


def check_port(host: str, port: int, log) -> None:
    """Exit with one line if ``host:port`` cannot be bound (in use, not an address here): uvicorn
    binds only after the app's start-up, i.e. after the model has loaded. The probe is closed at
    once (uvicorn binds its own socket, as it sets it up); SO_REUSEADDR as uvicorn sets it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            log.error(f"Cannot listen on {host}:{port} (RWKV_HOST / RWKV_PORT, --host / "
                      f"--port): {e.strerror or e}")
            sys.exit(2)


def _stop_while_starting(signum=signal.SIGINT, frame=None) -> None:
    """Ctrl-C before the server takes the signals over (settings, checks, imports): one line,
    and the process ends by the signal, as later in the start. A handler, not the default
    KeyboardInterrupt: an exception raised inside an import can be swallowed there, and the
    server then started and served after a Ctrl-C (session 36: 3 of 3 full-suite runs of
    test_a_ctrl_c_before_the_server_takes_the_signals_is_one_line); before it, a traceback of
    whichever line it hit (session 28's QA)."""
    print("Stopped while starting (SIGINT): nothing was served yet", file=sys.stderr)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _stop_while_starting)  # uvicorn's handlers replace it
    try:
        main()
    except KeyboardInterrupt:  # (one raised by other code all the same)
        _stop_while_starting()
