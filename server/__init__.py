"""RWKV-Server: batched RWKV-7 inference.

The SDK entry points are imported lazily so that ``import server.config`` stays light::

    from server import RWKV070ModelLoader, DynamicScheduler, SimpleScheduler, Task
    from server.task.manager import get_task_manager
"""

_EXPORTS = {
    "RWKV070ModelLoader": "server.model.loader",
    "DynamicScheduler": "server.scheduler",
    "SimpleScheduler": "server.scheduler",
    "BaseScheduler": "server.scheduler",
    "Task": "server.task.task",
    "Status": "server.task.task",
    "get_task_manager": "server.task.manager",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'server' has no attribute {name!r}")
