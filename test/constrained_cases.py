"""Cases shared by the constrained-decoding tests (test_constrained.py on the CPU,
test_constrained_gpu.py on CUDA): a schema the tiny random model can finish, and the checks."""

from server.task.constraint import Constraint

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["ok", "n", "tag"],
          "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 2, 3]},
                         "tag": {"type": "string", "maxLength": 3}}}


def check_schema_reply(reply: dict) -> None:
    assert set(reply) == {"ok", "n", "tag"}
    assert isinstance(reply["ok"], bool) and reply["n"] in (1, 2, 3)
    assert isinstance(reply["tag"], str) and len(reply["tag"]) <= 3


def replays(loader, grammar: str, tokens: list[int]) -> bool:
    """Every token is one the grammar allowed after the ones before (a fresh state)."""
    c = Constraint(grammar, loader.tokenizer)
    return all(c.accept(t) for t in tokens)


def record_fed_runs(monkeypatch) -> list:
    """A list that gets ``(seed, reply tokens before, the run)`` for each forced run fed
    (``SlotCycle._fast_forward``: server/scheduler/guide.py), while ``monkeypatch`` holds."""
    from server.scheduler.cycle import SlotCycle

    fed, real = [], SlotCycle._fast_forward

    def spy(self, slot, forced):
        task = self.slots[slot]
        before = len(task.output)
        real(self, slot, forced)
        fed.append((task.seed, before, tuple(task.output[before:])))

    monkeypatch.setattr(SlotCycle, "_fast_forward", spy)
    return fed
