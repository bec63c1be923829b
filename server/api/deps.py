"""What route handlers get from the app: the loaded runtime (built by the app's lifespan)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request


@dataclass
class Runtime:
    settings: Any  # server.config.Settings
    loader: Any  # server.model.loader.RWKV070ModelLoader
    scheduler: Any  # server.scheduler.DynamicScheduler (daemon running)
    manager: Any  # server.task.manager.TaskManager

    @property
    def model_name(self) -> str:
        return self.loader.name


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime
