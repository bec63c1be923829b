"""Checkpoint loading (shapes -> ModelConfig, one test per bad-file case), the random generator's
published layout, and the RWKV070ModelLoader bundle."""

import zipfile

import pytest
import torch

from server.model.checkpoint import CheckpointError, expected_shapes, infer_config, load_checkpoint
from server.model.random import PRESETS, main, make_random_state_dict, preset_config, random_tensor


@pytest.fixture(scope="module")
def small_sd():
    return make_random_state_dict(3, 128, 300, seed=7)  # L3 C128 V300, bf16


def save(tmp_path, obj, name="m.pth"):
    path = tmp_path / name
    torch.save(obj, path)
    return path


# ---- good files ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_load_reads_config_from_shapes(tmp_path, small_sd, dtype):
    sd, cfg = load_checkpoint(save(tmp_path, {k: v.to(dtype) for k, v in small_sd.items()}))
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.head_size, cfg.vocab_size) == (3, 128, 2, 64, 300)
    assert (cfg.d_decay, cfg.d_aaa, cfg.d_value, cfg.d_gate) == (32, 32, 32, 64)
    assert list(sd) == list(small_sd) and sd["head.weight"].dtype == dtype
    assert torch.equal(sd["blocks.2.att.w1"].float(), small_sd["blocks.2.att.w1"].float())


def test_lora_sizes_are_read_not_computed(small_sd):
    sd = dict(small_sd)
    for i in range(3):  # a checkpoint with a different decay-LoRA width than the formula
        sd[f"blocks.{i}.att.w1"] = torch.zeros(128, 96)
        sd[f"blocks.{i}.att.w2"] = torch.zeros(96, 128)
    assert infer_config(sd).d_decay == 96


# ---- bad files: each names its problem ---------------------------------------------------
def test_missing_file_says_where_models_come_from(tmp_path):
    with pytest.raises(CheckpointError, match=r"does not exist.*BlinkDL/rwkv7-g1.*server\.model\.random"):
        load_checkpoint(tmp_path / "nope.pth")
    with pytest.raises(CheckpointError, match="is a directory"):
        load_checkpoint(tmp_path)


def test_a_file_name_that_is_not_utf8_is_said_to_be_one(tmp_path, small_sd):
    """PyTorch opens files by a UTF-8 name: a Latin-1 one ("caf\\xe9.pth") failed as "corrupt,
    or not a state dict of tensors" (session 67's mutation review)."""
    import os

    good = save(tmp_path, small_sd)
    odd = os.path.join(os.fsencode(tmp_path), b"caf\xe9.pth")
    os.link(os.fsencode(good), odd)
    with pytest.raises(CheckpointError, match="its name is not valid UTF-8"):
        load_checkpoint(os.fsdecode(odd))


def test_garbage_or_truncated_file_is_unreadable(tmp_path, small_sd):
    path = tmp_path / "junk.pth"
    path.write_bytes(b"this is not a pickle or a zip file at all" * 10)
    with pytest.raises(CheckpointError, match="cannot read .*junk.pth as a PyTorch checkpoint"):
        load_checkpoint(path)
    good = save(tmp_path, small_sd).read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match="cannot read .*junk.pth .*corrupt"):
        load_checkpoint(path)


def test_a_git_lfs_pointer_or_an_empty_file_is_said_to_be_one(tmp_path):
    """A Hugging Face repository cloned without Git LFS leaves a ~130-byte pointer under the
    checkpoint's name: it was "corrupt, or not a state dict of tensors: UnpicklingError:
    WeightsUnpickler error: Unsupported operand 118"; an empty file (a download that failed)
    was "corrupt ...: EOFError: "."""
    path = tmp_path / "rwkv7-g1g-2.9b-20260526-ctx8192.pth"
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:" + "4d" * 32
                    + "\nsize 5839200000\n")
    with pytest.raises(CheckpointError, match=r"ctx8192.pth is a Git LFS pointer.*git lfs pull"):
        load_checkpoint(path)
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"ctx8192.pth is empty \(0 bytes\)"):
        load_checkpoint(path)


def test_not_a_state_dict(tmp_path):
    with pytest.raises(CheckpointError, match="is not a state dict .*list"):
        load_checkpoint(save(tmp_path, [torch.zeros(3)]))
    with pytest.raises(CheckpointError, match="not a state dict of tensors: entry 'epoch'"):
        load_checkpoint(save(tmp_path, {"epoch": 3, "emb.weight": torch.zeros(2, 2)}))


def test_rwkv6_file_is_not_rwkv7(tmp_path):
    sd6 = {"emb.weight": torch.zeros(300, 128), "head.weight": torch.zeros(300, 128),
           "blocks.0.att.time_decay": torch.zeros(128), "blocks.0.att.time_faaaa": torch.zeros(2, 64),
           "blocks.0.att.time_maa_x": torch.zeros(1, 1, 128)}
    with pytest.raises(CheckpointError, match=r"not an RWKV-7 checkpoint \(this looks like an "
                                              r"RWKV-4/5/6.*missing keys blocks\.0\.att\.r_k"):
        load_checkpoint(save(tmp_path, sd6))


def test_missing_key_in_later_block(tmp_path, small_sd):
    sd = {k: v for k, v in small_sd.items() if k != "blocks.2.ffn.value.weight"}
    with pytest.raises(CheckpointError, match=r"missing keys blocks\.2\.ffn\.value\.weight$"):
        load_checkpoint(save(tmp_path, sd))


def test_inconsistent_shape_names_the_key(tmp_path, small_sd):
    sd = dict(small_sd, **{"blocks.1.att.a2": torch.zeros(32, 96)})
    with pytest.raises(CheckpointError, match=r"inconsistent shapes: blocks\.1\.att\.a2 expected "
                                              r"\(32, 128\), got \(32, 96\)"):
        load_checkpoint(save(tmp_path, sd))
    sd = dict(small_sd, **{"head.weight": torch.zeros(301, 128)})
    with pytest.raises(CheckpointError, match=r"head\.weight expected \(300, 128\), got \(301, 128\)"
                                              r".*emb\.weight is \(300, 128\)"):
        infer_config(sd)
    # a bad layer-0 tensor (the sizes are read from layer 0): named, not a sound layer's (session
    # 22: "blocks.1.att.r_k expected (64, 2), got (2, 64)" for a transposed blocks.0.att.r_k)
    r_k = small_sd["blocks.0.att.r_k"]
    sd = dict(small_sd, **{"blocks.0.att.r_k": r_k.t().contiguous()})
    with pytest.raises(CheckpointError, match=rf"blocks\.0\.att\.r_k expected {tuple(r_k.shape)}".replace("(", "\\(").replace(")", "\\)")):
        infer_config(sd)
    two = {k: v for k, v in sd.items() if not k.startswith(("blocks.2.", "blocks.3."))}
    with pytest.raises(CheckpointError, match=r"blocks\.0\.att\.r_k is .* but blocks\.1\.att\.r_k is"):
        infer_config(two)


@pytest.mark.filterwarnings("ignore:Validating sparse tensor invariants")  # torch.load's note
def test_files_that_once_were_a_traceback_at_start_up(tmp_path, small_sd):
    """Each passed or escaped the checks and crashed start-up (a review, session 14)."""
    import re
    # one stray block index: a table of 10^8 layers' shapes took all memory
    sd = dict(small_sd, **{"blocks.100000000.att.extra": torch.zeros(1)})
    with pytest.raises(CheckpointError, match=r"block indices are not 0\.\.3"):
        load_checkpoint(save(tmp_path, sd))
    sd = {k: v for k, v in small_sd.items() if not k.startswith("blocks.1.")}
    with pytest.raises(CheckpointError, match=r"blocks \[1\] missing"):
        infer_config(sd)
    # a 0-dim LoRA stack: IndexError
    with pytest.raises(CheckpointError, match=r"blocks\.0\.att\.w1 expected \(\d+, \d+\), got \(\)"):
        infer_config(dict(small_sd, **{"blocks.0.att.w1": torch.tensor(1.0)}))
    # sparse tensors passed, then start-up failed in the first product
    with pytest.raises(CheckpointError, match="dense"):
        load_checkpoint(save(tmp_path, dict(small_sd, **{
            "emb.weight": small_sd["emb.weight"].float().to_sparse()})))
    # a tensor saved on the meta device (no values): "Cannot copy out of meta tensor" at start-up
    # (session 15)
    meta = torch.empty(small_sd["blocks.0.att.r_k"].shape, device="meta")
    with pytest.raises(CheckpointError, match=r"blocks\.0\.att\.r_k has no values"):
        load_checkpoint(save(tmp_path, dict(small_sd, **{"blocks.0.att.r_k": meta})))
    # a legacy file naming a storage it does not hold: torch.load's AssertionError
    path = tmp_path / "legacy.pth"
    torch.save(small_sd, path, _use_new_zipfile_serialization=False)
    data = path.read_bytes()
    key = re.search(rb"X.\x00\x00\x00(\d{6,})", data).group(1)
    path.write_bytes(data.replace(key, b"1" * len(key), 1))
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(path)


# ---- the random generator ------------------------------------------------------------------
def test_0_1b_preset_has_the_published_shapes():
    shapes = expected_shapes(preset_config("0.1b"))
    C, V, F = 768, 65536, 3072
    assert len(shapes) == 1 + 2 + 12 * 30 + 11 * 3 + 3
    assert shapes["emb.weight"] == (V, C) and shapes["head.weight"] == (V, C)
    assert "blocks.0.att.v0" not in shapes and "blocks.1.ln0.weight" not in shapes
    for i in range(12):
        a = f"blocks.{i}.att."
        assert shapes[a + "w1"] == (C, 64) and shapes[a + "w2"] == (64, C)
        assert shapes[a + "a1"] == (C, 64) and shapes[a + "a2"] == (64, C)
        assert shapes[a + "g1"] == (C, 128) and shapes[a + "g2"] == (128, C)
        if i:
            assert shapes[a + "v1"] == (C, 32) and shapes[a + "v2"] == (32, C)
            assert shapes[a + "v0"] == (1, 1, C)
        assert shapes[a + "r_k"] == (12, 64) and shapes[a + "x_g"] == (1, 1, C)
        assert shapes[a + "key.weight"] == (C, C) and shapes[a + "ln_x.bias"] == (C,)
        assert shapes[f"blocks.{i}.ffn.key.weight"] == (F, C)
        assert shapes[f"blocks.{i}.ffn.value.weight"] == (C, F)
    for key in ("blocks.3.att.w1", "blocks.3.att.r_k", "blocks.3.ffn.value.weight"):
        assert tuple(random_tensor(key, shapes[key]).shape) == shapes[key]


def test_presets_sizes_and_lora_formula():
    dims = {n: preset_config(n) for n in PRESETS}
    assert [(c.n_layer, c.n_embd) for c in dims.values()] == list(PRESETS.values())
    c = dims["2.9b"]  # sqrt(2560) = 50.6
    assert (c.d_decay, c.d_aaa, c.d_value, c.d_gate) == (128, 128, 96, 256)
    c = dims["13.3b"]  # sqrt(4096) = 64
    assert (c.n_layer, c.d_decay, c.d_value, c.d_gate) == (61, 160, 96, 320)
    n_params = sum(torch.Size(s).numel() for s in expected_shapes(dims["2.9b"]).values())
    assert 2.8e9 < n_params < 3.2e9


def test_generator_is_deterministic_per_key():
    a = make_random_state_dict(2, 64, 50, seed=1, dtype=torch.float32)
    b = make_random_state_dict(3, 64, 50, seed=1, dtype=torch.float32)
    assert torch.equal(a["blocks.1.att.w1"], b["blocks.1.att.w1"])  # independent of the others
    c = make_random_state_dict(2, 64, 50, seed=2, dtype=torch.float32)
    assert not torch.equal(a["blocks.1.att.w1"], c["blocks.1.att.w1"])


def test_cli_writes_a_loadable_checkpoint(tmp_path, capsys):
    out = tmp_path / "r.pth"
    main([str(out), "--preset", "tiny", "--layers", "3", "--vocab", "100", "--dtype", "fp16"])
    assert "wrote" in capsys.readouterr().out
    sd, cfg = load_checkpoint(out)
    assert (cfg.n_layer, cfg.n_embd, cfg.vocab_size) == (3, 128, 100)
    assert sd["emb.weight"].dtype == torch.float16
    with pytest.raises(SystemExit):
        main([str(out)])  # neither a preset nor --layers/--embd
    # impossible sizes are usage errors (exit 2, the reason on stderr), not tracebacks; a 0
    # was read as "not given" (a review, session 14)
    for bad in (["--layers", "0", "--embd", "64"], ["--preset", "tiny", "--layers", "0"],
                ["--layers", "2", "--embd", "100"], ["--layers", "-1", "--embd", "64"]):
        with pytest.raises(SystemExit) as e:
            main([str(tmp_path / "bad.pth"), *bad])
        assert e.value.code == 2 and "multiple of 64" in capsys.readouterr().err
    assert not (tmp_path / "bad.pth").exists()


class _Runs:
    def __reduce__(self):  # what a malicious checkpoint holds: a call made when unpickled
        import os
        return (os.system, ("echo unpickled!",))


def test_refused_pickle_names_the_reason_not_unsafe_advice(tmp_path, capfd):
    """torch's message starts with advice to load with weights_only=False (code execution) and
    gives its reason after the 300 characters shown (a review, session 14)."""
    path = save(tmp_path, {"emb.weight": torch.zeros(2, 2), "x": _Runs()})
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(path)
    msg = str(e.value)
    assert "GLOBAL" in msg and "system" in msg and "set to `False`" not in msg
    assert "unpickled!" not in capfd.readouterr().out  # (a shell command: fd-level capture)


@pytest.mark.parametrize("error", [
    MemoryError(),
    RuntimeError("[enforce fail at alloc_cpu.cpp:119] data. DefaultCPUAllocator: can't allocate "
                 "memory: you tried to allocate 5876000000 bytes. Error code 12 (Cannot allocate "
                 "memory)"),
])
def test_running_out_of_memory_while_reading_is_not_called_corrupt(tmp_path, small_sd,
                                                                   monkeypatch, error):
    """The machine running out of memory in torch.load says so (a review, session 14: it was
    "corrupt, or not a state dict")."""
    import server.model.checkpoint as ck

    path = save(tmp_path, small_sd)

    def fail(_path):
        raise error
    monkeypatch.setattr(ck, "_torch_load", fail)
    with pytest.raises(CheckpointError, match="ran out of memory reading .*m.pth") as got:
        load_checkpoint(path)
    assert "corrupt" not in str(got.value)


# ---- session 28's QA: files operators hold --------------------------------------------------
def test_a_head_size_other_than_64_is_refused(small_sd):
    """r_k [4, 32] (heads of 32) passed the checks; on CUDA every pass then failed in the
    kernels (they hold 64-wide heads)."""
    from dataclasses import replace

    from server.model.random import make_config

    cfg = replace(make_config(2, 128, 300), n_head=4, head_size=32)
    sd = {k: random_tensor(k, s, 3) for k, s in expected_shapes(cfg).items()}
    with pytest.raises(CheckpointError, match=r"head size of 32.*heads of 64"):
        infer_config(sd)


def test_wrapper_prefixes_are_read_through_and_state_files_are_named(tmp_path, small_sd):
    """DDP's ``module.`` and torch.compile's ``_orig_mod.`` on every key: "missing keys
    emb.weight, ..." with no word of the prefix; a state-tuning file given as the model: the
    same, with no word of import_state."""
    wrapped = {f"module._orig_mod.{k}": v for k, v in small_sd.items()}
    sd, cfg = load_checkpoint(save(tmp_path, wrapped))
    assert list(sd) == list(small_sd) and cfg == infer_config(small_sd)
    half = dict(small_sd, **{"module.extra": torch.zeros(1)})  # not on every key: as it is
    assert "module.extra" in load_checkpoint(save(tmp_path, half))[0]
    states = {f"blocks.{i}.att.time_state": torch.zeros(2, 64, 64) for i in range(3)}
    with pytest.raises(CheckpointError, match="this is a state file.*import_state"):
        load_checkpoint(save(tmp_path, states))


def test_weights_that_cannot_run_are_refused_naming_them(small_sd):
    """A NaN in a weight (or values the cast to the run dtype overflows) loaded, and every
    request then came back as empty text with a 200; layer 0's value-residual LoRA, which some
    published files carry, was warned about as a variant's parameters though never read."""
    from server.model.checkpoint import unused_keys
    from server.model.forward import RWKV7

    cfg = infer_config(small_sd)
    bad = dict(small_sd)
    bad["blocks.1.att.receptance.weight"] = bad["blocks.1.att.receptance.weight"].clone()
    bad["blocks.1.att.receptance.weight"][3, 5] = float("nan")
    with pytest.raises(CheckpointError, match=r"blocks\.1\.att\.receptance\.weight holds NaN"):
        RWKV7(bad, cfg, dtype=torch.float32)
    big = dict(small_sd)
    big["blocks.2.ffn.key.weight"] = big["blocks.2.ffn.key.weight"].clone()
    big["blocks.2.ffn.key.weight"][0, 0] = 1e6  # fine in bf16, past fp16's 65,504
    with pytest.raises(CheckpointError, match=r"ffn\.key\.weight holds values up to 9\.99e\+05, beyond float16.*bf16"):
        RWKV7(big, cfg, dtype=torch.float16)
    RWKV7(big, cfg, dtype=torch.float32)  # (it fits there)
    head = dict(small_sd, **{"head.weight": small_sd["head.weight"].clone()})
    head["head.weight"][7, 7] = float("inf")
    with pytest.raises(CheckpointError, match=r"head\.weight holds NaN or infinite"):
        RWKV7(head, cfg, dtype=torch.float32)
    extra = dict(small_sd, **{f"blocks.0.att.v{j}": small_sd[f"blocks.1.att.v{j}"]
                              for j in range(3)})
    assert unused_keys(extra, cfg) == []
    a, b = RWKV7(small_sd, cfg, dtype=torch.float32), RWKV7(extra, cfg, dtype=torch.float32)
    assert b.layers[0].v1 is None
    tokens = [[5, 17, 42, 7]]
    assert torch.equal(a.prefill(tokens, a.new_state(1)), b.prefill(tokens, b.new_state(1)))


def test_the_generator_never_replaces_a_file_unasked_nor_leaves_half_of_one(tmp_path,
                                                                           monkeypatch):
    """``server.model.random`` replaced an existing file without a word (a mistyped path to a
    real model), and a Ctrl-C in its save left a partial zip at the path that ``verify``
    passed (session 43's QA): an existing OUT needs ``--force``, and the file appears only
    complete (written beside it, then renamed)."""
    out = tmp_path / "m.pth"
    out.write_bytes(b"precious")
    with pytest.raises(SystemExit) as e:
        main([str(out), "--preset", "tiny"])
    assert e.value.code == 2 and out.read_bytes() == b"precious"

    def cut(sd, path):
        with open(path, "wb") as f:
            f.write(b"PK\x03\x04 half")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", cut)
    with pytest.raises(KeyboardInterrupt):
        main([str(out), "--preset", "tiny", "--force"])
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pth"]  # (no part left either)
    monkeypatch.undo()
    main([str(out), "--preset", "tiny", "--force"])
    assert out.read_bytes()[:2] == b"PK"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pth"]
    # its entries are named after the file, as a published checkpoint's (not the temporary
    # file's name, which ``verify`` quoted for a damaged entry)
    with zipfile.ZipFile(out) as z:
        assert {n.split("/")[0] for n in z.namelist()} == {"m"}


def test_a_whole_write_keeps_the_replaced_files_mode_and_takes_over_a_leftover_folder(tmp_path):
    """``write_whole``: a replaced file keeps its permissions (a private file stays private),
    and the folder a killed process of this pid and thread left beside the file does not
    stop the next write (it is used, then removed)."""
    import os
    import threading

    from server.files import write_whole

    out = tmp_path / "secret.st"
    out.write_bytes(b"old")
    os.chmod(out, 0o600)
    write_whole(out, lambda tmp: tmp.write_bytes(b"new"))
    assert out.read_bytes() == b"new" and out.stat().st_mode & 0o7777 == 0o600
    (tmp_path / f".rwkv-write-{os.getpid()}-{threading.get_ident()}").mkdir()
    write_whole(out, lambda tmp: tmp.write_bytes(b"newer"))
    assert out.read_bytes() == b"newer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.st"]


def test_whole_writes_of_two_threads_into_one_folder_do_not_meet(tmp_path):
    """Each thread's temporary folder is its own: one thread's write, ending (its folder
    removed) while another's is under way beside it, does not take that one's folder away."""
    import threading

    from server.files import write_whole

    b_started, a_done, errors = threading.Event(), threading.Event(), []

    def write_b(tmp):
        b_started.set()
        assert a_done.wait(10)
        tmp.write_bytes(b"b")

    def thread_b():
        try:
            write_whole(tmp_path / "b", write_b)
        except BaseException as e:  # (reported by the test below)
            errors.append(e)

    b = threading.Thread(target=thread_b)

    def write_a(tmp):
        b.start()
        assert b_started.wait(10)
        tmp.write_bytes(b"a")

    try:
        write_whole(tmp_path / "a", write_a)
    finally:
        a_done.set()
        b.join(10)
    assert errors == []
    assert (tmp_path / "a").read_bytes() == b"a" and (tmp_path / "b").read_bytes() == b"b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
