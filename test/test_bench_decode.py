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


def _shaped_model(preset: str, state_dtype):
    """A model of ``preset``'s published shapes on the meta device (no memory): what the
    roofline counts reads, nothing runs."""
    from types import SimpleNamespace

    import torch

    from server.model.layer_weights import LayerWeights
    from server.model.random import preset_config

    cfg = preset_config(preset)
    C, H, N, V = cfg.n_embd, cfg.n_head, cfg.head_size, cfg.vocab_size
    half, f32 = torch.float16, torch.float32

    def t(*shape, dtype=half):
        return torch.empty(*shape, dtype=dtype, device="meta")

    def layer(i):
        v = i > 0
        return LayerWeights(
            ln1_w=t(C, dtype=f32), ln1_b=t(C, dtype=f32), ln2_w=t(C, dtype=f32),
            ln2_b=t(C, dtype=f32), mix=t(6, C), wr=t(C, C), wk=t(C, C), wv=t(C, C),
            wo=t(C, C), w0=t(C), w1=t(C, cfg.d_decay), w2=t(cfg.d_decay, C), a0=t(C),
            a1=t(C, cfg.d_aaa), a2=t(cfg.d_aaa, C), v0=t(C) if v else None,
            v1=t(C, cfg.d_value) if v else None, v2=t(cfg.d_value, C) if v else None,
            g1=t(C, cfg.d_gate), g2=t(cfg.d_gate, C), k_k=t(H, N, dtype=f32),
            k_a=t(C, dtype=f32), r_k=t(C, dtype=f32), lnx_w=t(C, dtype=f32),
            lnx_b=t(C, dtype=f32), ffn_x_k=t(C), ffn_key=t(4 * C, C), ffn_value=t(C, 4 * C))

    return SimpleNamespace(cfg=cfg, dtype=half, state_dtype=state_dtype, emb=t(V, C),
                           head=t(V, C), ln_out=(t(C, dtype=f32), t(C, dtype=f32)),
                           layers=[layer(i) for i in range(cfg.n_layer)])


def test_roofline_counts_the_2_9b_and_7_2b_steps_by_hand():
    """Bytes and FLOPs of a decode step, counted by hand from MODEL.md's shapes (fp16 weights,
    LayerNorms and per-channel constants fp32): 2.9B (L32 C2560, LoRA 128/128/96/256) has
    2,615,705,600 matmul parameters in its layers and 167,772,160 in the head, 4,582,400 bytes
    of vectors, 20,480 of ln_out, a 5,120-byte embedding row a token; a slot's state is
    32·40·64² WKV elements + 32·2·2560 fp16 shift values (21,299,200 bytes fp32, 10,813,440
    fp16). FLOPs a token: 2 x the matmul parameters (head included) + the WKV's 9·64² a head
    (47,185,920). The embedding row, ln_out and the WKV were left out before."""
    import torch

    from server.bench import common

    m32 = _shaped_model("2.9b", torch.float32)
    assert common.state_bytes(m32) == 21_299_200
    assert common.state_bytes(_shaped_model("2.9b", torch.float16)) == 10_813_440
    assert common.model_bytes(m32) == 5_571_558_400
    assert common.roofline(m32, 1)["bytes"] == 5_571_558_400 + 5_120 + 2 * 21_299_200
    assert common.roofline(m32, 1024)["bytes"] == 49_197_562_880
    per_token = 2 * (2_615_705_600 + 167_772_160) + 47_185_920  # 5,614,141,440
    assert common.roofline(m32, 1)["flops"] == per_token
    assert common.roofline(m32, 1024)["flops"] == 1024 * per_token
    m72 = _shaped_model("7.2b", torch.float16)  # LoRA 160/160/96/320
    assert common.model_bytes(m72) == 13_813_440_512
    assert common.state_bytes(m72) == 17_301_504
    assert common.roofline(m72, 256)["flops"] == 256 * 13_881_573_376


def test_decode_bench_divides_a_pulse_by_the_steps_it_ran(monkeypatch):
    """A pulse whose rows have all ended stops early (EndProbe): ms/step is the pulse's time
    over the steps it ran, not over ``--steps`` (it was: a batch-1 pulse whose row sampled an
    end of text after one step read as 1/8 of its step time)."""
    import torch

    from server.bench import common
    from server.model.sampler import BatchSampler

    real = BatchSampler.sample

    def end_of_text(self, logits, *args, **kwargs):
        return torch.zeros_like(real(self, logits, *args, **kwargs))  # token 0: EOS

    monkeypatch.setattr(BatchSampler, "sample", end_of_text)
    model = common.build_model("tiny", "cpu", "fp32", "fp32")
    r = decode.bench_batch(model, 1, 8, 3)
    assert r["steps"] == 1 and r["tokens"] == 0
    assert decode.row(model, r)[1] == f"{r['dt'] * 1e3:.3f}"


def test_an_embedding_table_in_host_memory_is_not_counted_in_the_devices_bytes():
    """On CUDA the table stays in pinned host memory (embedding.py): its rows cross the bus,
    not the device memory whose bandwidth the roofline divides by."""
    from types import SimpleNamespace

    import torch

    from server.bench import common

    emb = torch.zeros(4, 8, dtype=torch.float16)
    assert common.embedding_row_bytes(SimpleNamespace(emb=emb, head=emb)) == 16
    on_device = SimpleNamespace(emb=emb, head=torch.zeros(4, 8, device="meta"))
    assert common.embedding_row_bytes(on_device) == 0
