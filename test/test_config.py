"""Settings from RWKV_* variables (server/config.py) and the kernel switches that read the same
variables directly (server/model/kernels/pdl.py)."""

import pytest
import torch

from server.config import load_settings


def test_bad_values_stop_with_the_variable_named(monkeypatch):
    monkeypatch.setenv("RWKV_PDL", "sometimes")
    monkeypatch.setenv("RWKV_DTYPE", "fp8")
    # past what a task may hold (Task.check_params): every request would fail in add_task
    monkeypatch.setenv("RWKV_DEFAULT_TOP_K", str(2**31))
    # empty: SQLite's private temporary database, nothing saved, nothing said (session 25's QA)
    monkeypatch.setenv("RWKV_TASK_DB_PATH", "")
    # inside the WKV's 32-token chunks: cached states had other bits than uncached runs
    monkeypatch.setenv("RWKV_PREFILL_CHUNK", "20")
    # the Task API's max_tokens range reaches the cap: past 2**63 - 1 a request in range was a
    # 500 in add_task, its task left listed, PREFILL for ever (session 34's review)
    monkeypatch.setenv("RWKV_MAX_TOKENS_CAP", str(2**63))
    with pytest.raises(SystemExit) as e:
        load_settings()
    msg = str(e.value)
    assert "Invalid configuration" in msg and "RWKV_PDL:" in msg and "RWKV_DTYPE:" in msg
    assert "RWKV_DEFAULT_TOP_K:" in msg and "RWKV_TASK_DB_PATH:" in msg
    assert "RWKV_PREFILL_CHUNK: must be at least 32" in msg and "RWKV_MAX_TOKENS_CAP:" in msg
    assert "Value error" not in msg  # pydantic's prefix for a validator's own message
    for name in ("RWKV_PDL", "RWKV_DTYPE", "RWKV_DEFAULT_TOP_K", "RWKV_TASK_DB_PATH",
                 "RWKV_MAX_TOKENS_CAP"):
        monkeypatch.delenv(name)
    for ok in ("32", "96"):
        monkeypatch.setenv("RWKV_PREFILL_CHUNK", ok)
        assert load_settings().prefill_chunk == int(ok)
    for auto in ("auto", "0"):  # by device (BaseScheduler.PREFILL_CHUNK)
        monkeypatch.setenv("RWKV_PREFILL_CHUNK", auto)
        assert load_settings().prefill_chunk == 0


def test_a_demo_and_a_model_path_exclude_each_other(monkeypatch):
    """RWKV_DEMO beside RWKV_MODEL_PATH served the demo and read no checkpoint, silently; a
    command-line --model (or --demo) overrides the other's variable (session 26's QA)."""
    import run

    monkeypatch.setenv("RWKV_DEMO", "tiny")
    monkeypatch.setenv("RWKV_MODEL_PATH", "my.pth")
    with pytest.raises(SystemExit) as e:
        load_settings()
    assert "RWKV_DEMO (random weights) and RWKV_MODEL_PATH" in str(e.value)
    run.apply_overrides(run.parse_args(["--model", "other.pth"]))
    s = load_settings()
    assert s.demo is None and s.model_path == "other.pth"
    monkeypatch.setenv("RWKV_MODEL_PATH", "my.pth")
    run.apply_overrides(run.parse_args(["--demo", "0.1b"]))
    s = load_settings()
    assert s.demo == "0.1b" and "model_path" not in s.model_fields_set


def test_an_empty_demo_is_none_and_an_api_key_with_spaces_is_refused(monkeypatch):
    """``RWKV_DEMO=`` (how env files unset a variable) is no demo, beside a model path too (it
    conflicted there, not alone); an API key with spaces or a line break at an end could never
    match (HTTP strips header values): refused at start (session 27's QA)."""
    monkeypatch.setenv("RWKV_DEMO", "")
    monkeypatch.setenv("RWKV_MODEL_PATH", "my.pth")
    s = load_settings()
    assert s.demo is None and s.model_path == "my.pth"
    for key in ("sk-abc ", " sk-abc", "sk-abc\r"):
        monkeypatch.setenv("RWKV_API_KEY", key)
        with pytest.raises(SystemExit) as e:
            load_settings()
        assert "RWKV_API_KEY:" in str(e.value) and "spaces" in str(e.value)
        assert "sk-abc" not in str(e.value)  # (a secret: the other settings' message shows
        # the value as written; session 72's mutation review)
    monkeypatch.setenv("RWKV_API_KEY", "sk-abc")
    assert load_settings().api_key == "sk-abc"


def test_values_with_spaces_or_line_breaks_at_their_ends_are_refused(monkeypatch):
    """A CRLF env file's carriage return (or a stray space) at a value's end: a task database
    path made a new file whose name ends in it (the stored templates seemingly lost), a model
    path's "not found" named a file that exists, a device or preset got puzzling refusals and
    numbers were quietly stripped (session 72's QA). Each is refused at start, naming the
    variable and the value as written; spaces inside a value stay allowed."""
    for var, value in (("RWKV_TASK_DB_PATH", "/tmp/t.db\r"), ("RWKV_MODEL_PATH", "m.pth "),
                       ("RWKV_DEVICE", "cpu\r"), ("RWKV_MAX_BATCH_SIZE", "64\r"),
                       ("RWKV_VERBOSE", " false")):
        monkeypatch.setenv(var, value)
        with pytest.raises(SystemExit) as e:
            load_settings()
        assert f"{var}: has spaces or line breaks at its ends ({value!r})" in str(e.value)
        monkeypatch.delenv(var)
    monkeypatch.setenv("RWKV_CORS_ORIGINS", "http://a.example, http://b.example")
    monkeypatch.setenv("RWKV_TASK_DB_PATH", "/tmp/my tasks.db")
    s = load_settings()
    assert s.task_db_path == "/tmp/my tasks.db" and s.cors_origins.startswith("http://a")


def test_an_empty_api_key_and_zero_token_limits_are_refused(monkeypatch):
    """``RWKV_API_KEY=`` (``${SECRET}`` with SECRET unset) served every route without a key,
    its log saying only "set RWKV_API_KEY to require one"; ``RWKV_MAX_TOKENS_CAP=0`` or
    ``RWKV_DEFAULT_MAX_TOKENS=0`` (meant as "no limit") gave every request an empty reply
    (session 42's QA). Each is refused at start, named; unset, the key is off."""
    monkeypatch.setenv("RWKV_API_KEY", "")
    monkeypatch.setenv("RWKV_MAX_TOKENS_CAP", "0")
    monkeypatch.setenv("RWKV_DEFAULT_MAX_TOKENS", "0")
    with pytest.raises(SystemExit) as e:
        load_settings()
    msg = str(e.value)
    assert "RWKV_API_KEY: is set but empty" in msg and "unset the variable" in msg
    assert "RWKV_MAX_TOKENS_CAP:" in msg and "RWKV_DEFAULT_MAX_TOKENS:" in msg
    for name in ("RWKV_API_KEY", "RWKV_MAX_TOKENS_CAP", "RWKV_DEFAULT_MAX_TOKENS"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("RWKV_MAX_TOKENS_CAP", "1")
    s = load_settings()
    assert s.api_key is None and s.max_tokens_cap == 1


def test_unknown_rwkv_variables_are_named():
    """A misspelt setting was ignored silently (``RWKV_MAX_BATCHSIZE=64`` served at the
    default batch size; session 27's QA): each RWKV_* variable that names no setting is a
    warning at start (run.py; test_a_stop_while_starting_exits_at_once sees it in the log)."""
    from server.config import unknown_variables

    env = {"RWKV_MAX_BATCHSIZE": "64", "RWKV_JIT_ON": "1", "RWKV_PORT": "1", "rwkv_device": "cpu",
           "RWKV_PDL": "0", "HOME": "/root"}
    notes = unknown_variables(env)
    assert len(notes) == 2, notes
    assert notes[0].startswith("RWKV_JIT_ON is not a setting") and "README" in notes[0]
    assert notes[1].startswith("RWKV_MAX_BATCHSIZE is not a setting")
    assert notes[1].endswith("did you mean RWKV_MAX_BATCH_SIZE?")


def test_pdl_setting_and_kernel_switch_agree(monkeypatch):
    pytest.importorskip("triton")
    from server.model.kernels import pdl

    # as if on a Hopper GPU (the switch never asks CUDA for anything else)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    cuda = torch.device("cuda")
    try:
        for value, on in (("true", True), ("1", True), ("false", False), ("0", False),
                          ("off", False), ("no", False)):
            monkeypatch.setenv("RWKV_PDL", value)
            pdl.enabled.cache_clear()
            assert load_settings().pdl is on
            assert pdl.enabled(cuda) is on, value
            assert pdl.launch_options(cuda, 16) == ({"PDL": True, "launch_pdl": True} if on
                                                     else {"PDL": False})
            assert pdl.launch_options(cuda, 17) == {"PDL": False}  # beyond the small batch
        monkeypatch.setenv("RWKV_PDL", "true")
        pdl.enabled.cache_clear()
        assert not pdl.enabled(torch.device("cpu"))
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
        pdl.enabled.cache_clear()
        assert not pdl.enabled(cuda)  # Ampere: no PDL
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        pdl.enabled.cache_clear()
        assert not pdl.enabled(cuda)  # the interpreter runs no PTX
    finally:
        pdl.enabled.cache_clear()


def test_readme_settings_table_lists_every_setting_with_its_default():
    """README.md's settings table names every ``Settings`` field (as ``RWKV_<NAME>``) with the
    default the code has: a new setting, or a changed default, shows up in the README too."""
    import re
    from pathlib import Path

    from server.config import Settings

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    rows = {}
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`RWKV_"):
            names = re.findall(r"`RWKV_([A-Z0-9_]+)`", cells[0])
            values = [v.strip().strip("`") for v in cells[1].split(",")]
            values = values if len(values) == len(names) else [cells[1].strip("`")] * len(names)
            rows.update({n.lower(): v for n, v in zip(names, values)})
    fields = Settings.model_fields
    assert set(fields) == set(rows), (set(fields) ^ set(rows))
    for name, field in fields.items():
        want, got = field.default, rows[name]
        if want is None:
            assert got == "—", name
        elif isinstance(want, bool):
            assert got == str(want).lower(), name
        elif isinstance(want, (int, float)):
            assert float(got) == want, name
        else:  # strings (the vocabulary: a path resolved from the repository root)
            assert str(want) == got or str(want).endswith("/" + got), name


def test_the_cuda_defaults_yield_to_the_users_variables():
    """The server's allocator configuration (expandable segments) is set where the user set
    neither of PyTorch's variables, and each cuBLAS workspace size where the user did not set
    it; set, even to nothing, theirs stands untouched."""
    from server.config import ALLOCATOR_DEFAULT, BLAS_DEFAULTS, cuda_defaults

    env = {"PATH": "/bin"}
    want = {"PYTORCH_CUDA_ALLOC_CONF": ALLOCATOR_DEFAULT, "CUBLAS_WORKSPACE_CONFIG": ":4096:2",
            "CUBLASLT_WORKSPACE_SIZE": "4096"}
    assert cuda_defaults(env) == want and env == {"PATH": "/bin", **want}
    for given in ({"PYTORCH_CUDA_ALLOC_CONF": ""}, {"PYTORCH_ALLOC_CONF": "backend:native"},
                  {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}):
        env = dict(given)
        assert cuda_defaults(env) == BLAS_DEFAULTS and env == {**given, **BLAS_DEFAULTS}
    env = {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}  # (e.g. for deterministic algorithms)
    assert cuda_defaults(env) == {"PYTORCH_CUDA_ALLOC_CONF": ALLOCATOR_DEFAULT,
                                  "CUBLASLT_WORKSPACE_SIZE": "4096"}
    assert env["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_copyback_mb_reaches_the_served_engine(monkeypatch, tmp_path):
    """``RWKV_COPYBACK_MB`` bounds the finished states gathered on the device (a memory knob):
    0 is refused with the variable named; a valid value is the served engine's budget."""
    from server.api.lifecycle import build_runtime, close_runtime

    monkeypatch.setenv("RWKV_COPYBACK_MB", "0")
    with pytest.raises(SystemExit) as e:
        load_settings()
    assert "RWKV_COPYBACK_MB:" in str(e.value)
    for var, value in (("RWKV_COPYBACK_MB", "512"), ("RWKV_DEMO", "tiny"), ("RWKV_DEVICE", "cpu"),
                       ("RWKV_TASK_DB_PATH", str(tmp_path / "tasks.db"))):
        monkeypatch.setenv(var, value)
    rt = build_runtime(load_settings())
    try:
        assert rt.scheduler.engine.copyback.budget == 512 << 20  # (the default: 256)
    finally:
        close_runtime(rt)


def test_prefill_tokens_reaches_the_served_model(monkeypatch):
    """``RWKV_PREFILL_TOKENS`` caps the model's batched passes (a memory knob): too small or
    too large a value is refused with the variable named; a valid one is the loaded model's,
    and its passes hold no more rows than it allows."""
    from server.api.lifecycle import load_model

    for bad in ("16", "65537"):  # (past 65,536 the kernels' 32-bit offsets could wrap)
        monkeypatch.setenv("RWKV_PREFILL_TOKENS", bad)
        with pytest.raises(SystemExit) as e:
            load_settings()
        assert "RWKV_PREFILL_TOKENS:" in str(e.value)
    monkeypatch.setenv("RWKV_PREFILL_TOKENS", "64")
    monkeypatch.setenv("RWKV_DEMO", "tiny")
    monkeypatch.setenv("RWKV_DEVICE", "cpu")
    model = load_model(load_settings()).model
    assert model.prefill_tokens == 64
    rows = []
    run = model._prefill_pass
    monkeypatch.setattr(model, "_prefill_pass",
                        lambda tokens, group, *a: (rows.append(len(group)), run(tokens, group, *a)))
    model.prefill([[i + 1] * 20 for i in range(8)], model.new_state(8), logits=False)
    # 20 tokens a row pad to 32 on the CPU (its WKV chunk): two rows a pass
    assert rows == [2, 2, 2, 2], rows
