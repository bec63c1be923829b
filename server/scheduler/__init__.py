from server.scheduler.base import BaseScheduler, QueueFull
from server.scheduler.dynamic import DynamicScheduler
from server.scheduler.simple import SimpleScheduler

__all__ = ["BaseScheduler", "DynamicScheduler", "SimpleScheduler", "QueueFull"]
