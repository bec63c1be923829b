"""SimpleScheduler: fixed capacity (``max_batch_size`` slots), no resizing — a base to subclass."""

from server.scheduler.base import BaseScheduler


class SimpleScheduler(BaseScheduler):
    log_name = "scheduler.simple"
