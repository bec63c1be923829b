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
