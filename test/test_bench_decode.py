"""``python -m server.bench decode`` on the CPU: its table per run, and ``--end-probe`` (the
pulse's end flags read as served, or unread as before session 29) taking effect."""

from server.bench import decode
from server.scheduler import engine as engine_module
from server.scheduler.probe import EndProbe


def test_decode_bench_runs_with_and_without_the_end_probe(capsys, monkeypatch):
    made = []
    real_init = EndProbe.__init__

    def counting(self, *args):
        made.append(1)
        real_init(self, *args)

    monkeypatch.setattr(EndProbe, "__init__", counting)
    monkeypatch.setattr(engine_module, "EndProbe", EndProbe)  # (restored whatever happens)
    decode.main(["--preset", "tiny", "--device", "cpu", "--dtype", "fp32", "--batch", "1,2",
                 "--steps", "4", "--pulses", "2", "--end-probe", "0"])
    assert made == [] and engine_module.EndProbe is decode._NoProbe
    decode.main(["--preset", "tiny", "--device", "cpu", "--dtype", "fp32", "--batch", "1",
                 "--steps", "4", "--pulses", "2", "--end-probe", "1"])
    out = capsys.readouterr().out
    assert made and engine_module.EndProbe is EndProbe
    assert "end flags unread (--end-probe 0)" in out
    assert out.count("| batch | ms/step | tok/s |") == 2 and "\n| 2 | " in out


def test_decode_bench_times_rows_asking_for_log_probabilities(capsys, monkeypatch):
    """``--logprobs off,3``: a run as served, then one whose rows all ask for 3 alternatives
    (the engine records them: its recorder is made in the second run's pulses only)."""
    from server.scheduler import logprobs

    made = []
    real_init = logprobs.LogprobRecorder.__init__

    def counting(self, wants, device):
        made.append(sorted(wants.values()))
        real_init(self, wants, device)

    monkeypatch.setattr(logprobs.LogprobRecorder, "__init__", counting)
    decode.main(["--preset", "tiny", "--device", "cpu", "--dtype", "fp32", "--batch", "2",
                 "--steps", "2", "--pulses", "2", "--logprobs", "off,3"])
    out = capsys.readouterr().out
    assert out.count("| batch | ms/step | tok/s |") == 2
    assert "log probabilities with 3 alternatives" in out
    assert made and all(w == [3, 3] for w in made)


def test_decode_bench_times_constrained_rows(capsys, monkeypatch):
    """``--constrained 0,1``: a run as served, then one whose first row decodes under a
    grammar (the engine's Guide is made in the second run's pulses only, for slot 0)."""
    from server.scheduler import guide

    made = []
    real_init = guide.Guide.__init__

    def counting(self, constraints, *args, **kw):
        made.append(sorted(constraints))
        real_init(self, constraints, *args, **kw)

    monkeypatch.setattr(guide.Guide, "__init__", counting)
    decode.main(["--preset", "tiny", "--device", "cpu", "--dtype", "fp32", "--batch", "2",
                 "--steps", "3", "--pulses", "2", "--constrained", "0,1"])
    out = capsys.readouterr().out
    assert out.count("| batch | ms/step | tok/s |") == 2
    assert "1 rows constrained" in out
    assert made and all(slots == [0] for slots in made)


def test_decode_bench_sets_every_rows_penalty_decay(capsys, monkeypatch):
    """``--penalty-decay 0.5``: every row decays its penalties (the update's decay pass runs;
    at 1, the default, it is skipped): the rows' sampling parameters carry it."""
    from server.scheduler.engine import BatchEngine

    seen = []
    real_load = BatchEngine.load

    def spying(self, slots, tasks, *args, **kw):
        seen.extend(t.penalty_decay for t in tasks)
        return real_load(self, slots, tasks, *args, **kw)

    monkeypatch.setattr(BatchEngine, "load", spying)
    decode.main(["--preset", "tiny", "--device", "cpu", "--dtype", "fp32", "--batch", "2",
                 "--steps", "2", "--pulses", "1", "--penalty-decay", "0.5"])
    assert "penalty decay 0.5" in capsys.readouterr().out
    assert seen and set(seen) == {0.5}
