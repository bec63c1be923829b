"""RWKV070ModelLoader (model + tokenizer bundle), and the reference cross-checked against the
independent `rwkv` package (RWKV_V7_ON=1, cpu fp32) on a random checkpoint."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from server.model.checkpoint import CheckpointError, infer_config
from server.model.loader import RWKV070ModelLoader
from server.model.random import make_random_state_dict
from server.model.reference import ReferenceRWKV7

NAME = "rwkv7-g1g-test-20260526-ctx8192"


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / f"{NAME}.pth"
    torch.save(make_random_state_dict(2, 128, 65536, seed=5), path)
    return path


def test_loader_bundles_model_and_tokenizer(tiny_path):
    loader = RWKV070ModelLoader(str(tiny_path), device="cpu", dtype="fp32")
    assert loader.name == NAME and loader.cfg.n_layer == 2 and loader.cfg.vocab_size == 65536
    assert loader.model.dtype == torch.float32 and loader.model.state_dtype == torch.float32
    text = "User: 你好，world!\n\nAssistant:"
    ids = loader.encode(text)
    assert ids[0] == 24281 and loader.decode(ids) == text
    st = loader.gen_state(batch_size=3)
    assert st.batch_size == 3 and st.device.type == "cpu" and not st.wkv.any()
    assert st.wkv.shape == (2, 3, 2, 64, 64)
    logits = loader.model.prefill([ids], loader.model.new_state(1))
    sd = torch.load(tiny_path, weights_only=True)
    ref = ReferenceRWKV7(sd, infer_config(sd))
    expect = ref.forward_seq(ids, ref.zero_state())
    assert ((logits[0] - expect).norm() / expect.norm()) < 1e-4


def test_loader_dtypes_from_strings(tiny_path):
    loader = RWKV070ModelLoader(tiny_path, device="cpu", dtype="bf16", state_dtype="fp16")
    assert loader.model.dtype == torch.bfloat16 and loader.model.state_dtype == torch.float16
    st = loader.gen_state()
    assert st.shift.dtype == torch.bfloat16 and st.wkv.dtype == torch.float16
    with pytest.raises(ValueError, match="unknown dtype"):
        RWKV070ModelLoader(tiny_path, device="cpu", dtype="int8")


@pytest.mark.parametrize("native", [True, False])
def test_loader_hints_bf16_on_a_cpu_that_has_it(tiny_path, monkeypatch, native):
    """With the default dtype on a CPU that computes bf16 natively, the load log says that
    RWKV_DTYPE=bf16 is faster; not on other CPUs, and not when a dtype was chosen."""
    from loguru import logger

    import server.model.loader as loader_mod

    monkeypatch.setattr(loader_mod, "cpu_has_bf16", lambda: native)
    lines = []
    sink = logger.add(lines.append, level="INFO", format="{message}")
    try:
        RWKV070ModelLoader(tiny_path, device="cpu")
        chosen = len(lines)
        RWKV070ModelLoader(tiny_path, device="cpu", dtype="fp32")
    finally:
        logger.remove(sink)
    hints = [i for i, line in enumerate(lines) if "RWKV_DTYPE=bf16" in line]
    assert hints == ([chosen - 1] if native else [])


def test_loader_warns_of_tensors_outside_the_rwkv7_layout(tiny_path):
    """A checkpoint with tensors the forward never reads (a variant's extra parameters) loads,
    with one warning naming how many and which; a published layout gives none."""
    from loguru import logger

    sd = torch.load(tiny_path, weights_only=True)
    lines = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    try:
        RWKV070ModelLoader("plain", device="cpu", dtype="fp32", state_dict=dict(sd))
        assert lines == []
        extra = {f"blocks.{i % 2}.att.deep_emb{i}": torch.zeros(4) for i in range(7)}
        RWKV070ModelLoader("variant", device="cpu", dtype="fp32", state_dict={**sd, **extra})
    finally:
        logger.remove(sink)
    assert len(lines) == 1
    assert "variant: 7 tensors" in lines[0] and "blocks.0.att.deep_emb0" in lines[0]


def test_loader_warns_of_a_vocabulary_short_of_the_model(tiny_path, tmp_path):
    """A vocabulary file cut short (or a model with more ids than it) loaded without a word;
    prompts then tokenized byte by byte and the ids past the file decoded to nothing (session
    28's QA). The published pair (65,530 ids, a model of 65,536) gives no warning."""
    from loguru import logger

    from server.model.tokenizer import DEFAULT_VOCAB_PATH

    cut = tmp_path / "vocab1000.txt"
    lines_of = Path(DEFAULT_VOCAB_PATH).read_text(encoding="utf-8").splitlines(keepends=True)
    cut.write_text("".join(lines_of[:1000]), encoding="utf-8")
    lines = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    try:
        RWKV070ModelLoader(tiny_path, device="cpu", dtype="fp32")
        assert lines == []
        RWKV070ModelLoader(tiny_path, vocab_path=cut, device="cpu", dtype="fp32")
    finally:
        logger.remove(sink)
    assert len(lines) == 1 and "defines ids up to 999 but the model has 65536" in lines[0]


def test_loader_missing_model(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        RWKV070ModelLoader(tmp_path / "missing.pth")


def test_loader_takes_a_state_dict_checked_as_a_file_is(tiny_path):
    """A state dict already in memory (the demo's random weights) loads as its file does, under
    the given name, and a bad one is refused with the file's message naming it."""
    sd = torch.load(tiny_path, weights_only=True)
    from_file = RWKV070ModelLoader(tiny_path, device="cpu", dtype="fp32")
    in_memory = RWKV070ModelLoader("rwkv7-demo-x", device="cpu", dtype="fp32", state_dict=sd)
    assert in_memory.name == "rwkv7-demo-x" and in_memory.cfg == from_file.cfg
    ids = from_file.encode("User: hello\n\nAssistant:")
    a, b = (m.model.prefill([ids], m.model.new_state(1)) for m in (from_file, in_memory))
    assert torch.equal(a, b)
    del sd["head.weight"]
    with pytest.raises(CheckpointError, match="rwkv7-demo-x.*head.weight"):
        RWKV070ModelLoader("rwkv7-demo-x", device="cpu", state_dict=sd)
    with pytest.raises(CheckpointError, match="rwkv7-demo-x: blocks.0.att.r_k .*no values"):
        RWKV070ModelLoader("rwkv7-demo-x", device="cpu", state_dict={
            **torch.load(tiny_path, weights_only=True),
            "blocks.0.att.r_k": torch.empty(2, 64, device="meta")})


def test_demo_weights_on_the_cpu_are_the_random_checkpoint():
    """The demo's in-memory weights on the CPU are `server.model.random`'s checkpoint of the
    preset, value for value (the demo no longer goes through a temporary file)."""
    from server.api.lifecycle import demo_state_dict

    got = demo_state_dict("tiny", torch.device("cpu"))
    want = make_random_state_dict(2, 128)
    assert list(got) == list(want)
    assert all(torch.equal(got[k], want[k]) and got[k].device.type == "cpu" for k in want)
    with pytest.raises(SystemExit, match="choose one of"):
        demo_state_dict("3b", torch.device("cpu"))


def test_demo_model_is_named_after_its_preset(monkeypatch):
    """The served model of ``--demo 2.9b`` is "rwkv7-demo-2.9b" (the in-memory weights' first
    form named it "rwkv7-demo-2", its path's stem cut at the preset's dot)."""
    from server.api.lifecycle import load_model
    from server.config import Settings
    from server.model import random

    monkeypatch.setitem(random.PRESETS, "0.0b", (2, 128))  # a tiny preset with a dot
    loader = load_model(Settings(demo="0.0b", device="cpu", dtype="fp32"))
    assert loader.name == "rwkv7-demo-0.0b" and loader.cfg.n_layer == 2


CROSS_CHECK = textwrap.dedent("""
    import json, os, sys, torch
    from rwkv.model import RWKV
    path, tokens = sys.argv[1], json.loads(sys.argv[2])
    model = RWKV(path[:-len(".pth")], strategy="cpu fp32")
    logits, state = model.forward(tokens[:-1], None)
    last, state = model.forward(tokens[-1:], state)
    torch.save({"prefill": logits, "step": last, "wkv": torch.stack(state[1::3])}, path + ".out")
""")


def test_reference_agrees_with_the_rwkv_package(tmp_path):
    """The independent implementation in the `rwkv` package gives the same logits and state
    (relative error 5e-7 here). The bound is tight enough to catch a changed norm eps, a
    constant the fast paths import from the reference (LayerNorm 1e-5 -> 1e-6: 3.6e-6 to
    8.8e-6; GroupNorm 64e-5 -> 1e-5: 2.7e-4; session 41's mutation review)."""
    path = tmp_path / "x.pth"
    sd = make_random_state_dict(3, 128, 512, seed=11)
    torch.save(sd, path)
    tokens = [5, 100, 7, 300, 2, 9, 11, 42]
    env = dict(os.environ, RWKV_V7_ON="1", RWKV_JIT_ON="1", RWKV_CUDA_ON="0")
    subprocess.run([sys.executable, "-c", CROSS_CHECK, str(path), json.dumps(tokens)],
                   check=True, env=env, capture_output=True, timeout=120)
    out = torch.load(Path(str(path) + ".out"), weights_only=True)
    ref = ReferenceRWKV7(sd, infer_config(sd))
    st = ref.zero_state()
    prefill = ref.forward_seq(tokens[:-1], st)
    step = ref.forward(tokens[-1], st)
    for got, want in ((out["prefill"], prefill), (out["step"], step), (out["wkv"], st.wkv[:, 0])):
        assert ((got - want).norm() / want.norm()) < 2e-6


def test_a_missing_vocabulary_fails_before_the_model_loads(tiny_path, tmp_path, monkeypatch):
    """The SDK read the vocabulary after building the model: a wrong path failed only after
    seconds to minutes of loading (the server checks it first; session 29's QA)."""
    import server.model.loader as loader_module

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the vocabulary was checked")

    monkeypatch.setattr(loader_module, "load_checkpoint", no_model)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        RWKV070ModelLoader(tiny_path, vocab_path=tmp_path / "nope.txt", device="cpu")


@pytest.mark.parametrize("verbose", ["false", "true"])
def test_the_sdk_log_follows_rwkv_verbose(tiny_path, verbose):
    """``RWKV_VERBOSE=false`` (the seed's settings table: INFO logs off) had no effect in the
    SDK: the loader's sink printed INFO lines (a line a second while decoding) whatever it
    said (session 29's QA). Warnings still print."""
    script = textwrap.dedent(f"""
        from server import RWKV070ModelLoader
        from server.logger import get_logger
        RWKV070ModelLoader({str(tiny_path)!r}, device="cpu", dtype="fp32")
        get_logger("test").warning("a warning")
    """)
    env = {**os.environ, "RWKV_VERBOSE": verbose}
    r = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[1],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "a warning" in r.stderr
    assert ("| INFO " in r.stderr) == (verbose == "true")
