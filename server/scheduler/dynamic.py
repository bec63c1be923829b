"""DynamicScheduler: capacity follows load in powers of two, 1 … ``max_batch_size``.

Capacity is the next power of two of (tasks in slots + tasks waiting), clamped to
``[1, max_batch_size]``. Growing happens when tasks are admitted, shrinking after a pulse; either
way live slots are compacted to the front (``Compact N tasks, cap A -> B in X ms``).
"""

from server.scheduler.base import BaseScheduler


def next_power_of_two(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


class DynamicScheduler(BaseScheduler):
    log_name = "scheduler.dynamic"

    def initial_capacity(self) -> int:
        return 1

    def target_capacity(self, needed: int) -> int:
        return min(next_power_of_two(needed), self.max_batch_size)
