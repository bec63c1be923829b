"""One log format for everything: our loguru loggers and uvicorn/starlette's stdlib logging.

Format (as in the product README): ``12:01:23.45 | INFO    | scheduler.dynamic  | message``.
Use ``get_logger("scheduler.dynamic")`` to get a logger bound to a component name.
"""

import logging
import sys

from loguru import logger

FORMAT = "{time:HH:mm:ss.SS} | {level: <7} | {extra[name]: <18} | {message}"
_configured = False


class _InterceptHandler(logging.Handler):
    """Forward stdlib log records (uvicorn, starlette, fastapi) to loguru."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        name = "api" if record.name.startswith(("uvicorn", "starlette", "fastapi")) else record.name
        logger.bind(name=name).opt(exception=record.exc_info).log(level, record.getMessage())


def setup_logging(verbose: bool = True) -> None:
    """Install the single sink and route stdlib loggers through it (idempotent)."""
    global _configured
    logger.remove()
    logger.configure(extra={"name": "rwkv"})
    # diagnose=False: tracebacks never print variable values (request headers hold API keys)
    logger.add(sys.stderr, format=FORMAT, level="INFO" if verbose else "WARNING", enqueue=False,
               diagnose=False)
    if not _configured:
        logging.basicConfig(handlers=[_InterceptHandler()], level=logging.INFO, force=True)
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "starlette", "fastapi"):
            lg = logging.getLogger(name)
            lg.handlers = [_InterceptHandler()]
            lg.propagate = False
        _configured = True


def replace_default_sink(verbose: bool = True) -> None:
    """For the SDK (no ``setup_logging``): loguru's own default sink prints DEBUG (a line per
    decode pulse) in another format; swap it for ours at INFO (progress ~1 line/s), or WARNING
    when not ``verbose`` (``RWKV_VERBOSE=false``, as the server reads it). A script that removed
    that sink (configured loguru itself, or ran ``setup_logging``) is left alone."""
    try:
        logger.remove(0)  # loguru's default sink has id 0
    except ValueError:
        return
    logger.configure(extra={"name": "rwkv"})
    logger.add(sys.stderr, format=FORMAT, level="INFO" if verbose else "WARNING",
               diagnose=False)


def get_logger(name: str):
    """A loguru logger that prints ``name`` in the component column."""
    return logger.bind(name=name)
