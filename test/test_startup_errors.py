"""How ``run.py`` fails to start: one line and exit status 2 for the operator's errors, wherever
they are found (session 31's QA)."""

import os
import shutil
import subprocess
import sys

import pytest
import torch

NAN_LINE = ("ERROR   | api                | Cannot load the model: blocks.0.att.key.weight holds "
            "NaN or infinite values (a damaged or diverged checkpoint)")

# run.py with the app's build_runtime raising RAISE (found while the runtime is built, in the
# ASGI lifespan: past run.py's own checks)
LAUNCH = """
import sys
import torch
import server.api.app as app_module
import server.api.lifecycle as lifecycle
from server.task.store import TaskStoreError

def build_runtime(settings):
    raise RAISE

app_module.build_runtime = build_runtime
import run
run.main(sys.argv[1:])
"""


def _run(args, env=None, cmd=None, tmp_path=None):
    from server_harness import ROOT, SERVER_ENV, free_port

    cmd = cmd or [sys.executable, "run.py"]
    env = {**os.environ, **SERVER_ENV, "RWKV_TASK_DB_PATH": str(tmp_path / "tasks.db"),
           **(env or {})}
    p = subprocess.run([*cmd, *args, "--host", "127.0.0.1", "--port", str(free_port())],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def test_an_operator_error_while_the_model_loads_is_one_line_and_exit_2(tiny_model_path,
                                                                        tmp_path):
    """A checkpoint whose weights hold NaN passes run.py's check of the layout and fails while
    the lifespan loads the model: the one line was followed by a ~20-line traceback of the
    lifespan's ``SystemExit(2)`` and "Application startup failed. Exiting.", and the process
    exited 3 (uvicorn's status for any failed start) where run.py's own checks exit 2."""
    sd = torch.load(tiny_model_path, weights_only=True)
    sd["blocks.0.att.key.weight"].fill_(float("nan"))
    path = tmp_path / "nan.pth"
    torch.save(sd, path)
    rc, out = _run(["--model", str(path)], tmp_path=tmp_path)
    assert rc == 2 and NAN_LINE in out, (rc, out[-3000:])
    assert "Traceback" not in out and "SystemExit" not in out and "startup failed" not in out, out
    assert "Uvicorn running" not in out and out.rstrip().endswith(NAN_LINE.split("| ")[-1]), out


@pytest.mark.parametrize("raised,line,rc", [
    ("TaskStoreError('task database x.db: locked (RWKV_TASK_DB_PATH)')",
     "Cannot start: task database x.db: locked (RWKV_TASK_DB_PATH)", 2),
    ("lifecycle.StartupError('warm-up ran out of GPU memory: lower RWKV_MAX_BATCH_SIZE')",
     "Cannot start: warm-up ran out of GPU memory: lower RWKV_MAX_BATCH_SIZE", 2),
    ("torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 GiB')",
     "Cannot start: out of memory loading the model (OutOfMemoryError: CUDA out of memory.", 2),
    ("ZeroDivisionError('a bug')", "ZeroDivisionError: a bug", 3),  # a bug: its traceback
])
def test_errors_while_the_runtime_is_built(tmp_path, raised, line, rc):
    """The task store's errors, the warm-up's and running out of memory (a model too large
    for the device) are the operator's too: one line, exit 2. Anything else is a bug: uvicorn logs its traceback and exits 3."""
    code = LAUNCH.replace("RAISE", raised)
    got, out = _run(["--demo", "tiny"], cmd=[sys.executable, "-c", code], tmp_path=tmp_path)
    assert got == rc and line in out, (got, out[-3000:])
    bug = rc == 3
    assert ("Traceback" in out) == bug and ("Application startup failed" in out) == bug, out


# run.py with another program taking the port once run.py's probe has found it free (while the
# model loads: minutes for a large one)
TAKE_PORT = """
import socket
import sys
import run

probe, taken = run.check_port, []

def check_then_take(host, port, log):
    probe(host, port, log)
    if not taken:
        taken.append(socket.create_server((host, port)))

run.check_port = check_then_take
run.main(sys.argv[1:])
"""


def test_a_port_taken_while_the_model_loads_is_named_with_exit_2(tmp_path):
    """Two servers started at once on one port (another GPU, another database) both passed
    the probe; the later to finish loading failed in uvicorn's bind with exit 3, the status
    of a bug, and a line naming neither RWKV_PORT nor --port."""
    rc, out = _run(["--demo", "tiny"], cmd=[sys.executable, "-c", TAKE_PORT], tmp_path=tmp_path)
    assert rc == 2 and "Cannot listen on 127.0.0.1:" in out and "--port" in out, (rc, out[-3000:])
    assert "Traceback" not in out and "Uvicorn running" not in out, out


def test_invalid_settings_exit_2(tmp_path):
    """Invalid settings exited 1 (a SystemExit with a message), every other start-up error 2."""
    rc, out = _run(["--demo", "tiny"], env={"RWKV_DTYPE": "fp8"}, tmp_path=tmp_path)
    assert rc == 2 and "Invalid configuration:\n  RWKV_DTYPE:" in out, (rc, out[-3000:])
    assert "Traceback" not in out


def test_an_empty_host_is_refused(tmp_path):
    """``--host ""`` (or ``RWKV_HOST=``) was taken: "Uvicorn running on http://:18003"."""
    from server_harness import ROOT, SERVER_ENV, free_port

    for args, env in ((["--host", ""], {}), ([], {"RWKV_HOST": " "})):
        cmd = [sys.executable, "run.py", "--demo", "tiny", *args]
        env = {**os.environ, **SERVER_ENV, "RWKV_TASK_DB_PATH": str(tmp_path / "t.db"), **env}
        p = subprocess.run([*cmd, "--port", str(free_port())], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
        out = p.stdout + p.stderr
        assert p.returncode == 2 and "RWKV_HOST: " in out and "is empty" in out, out[-3000:]
        assert "Uvicorn running" not in out and "Traceback" not in out


def test_a_model_file_without_read_permission_is_not_called_corrupt(tiny_model_path, tmp_path,
                                                                     monkeypatch):
    """A checkpoint the server's user may not read was "cannot read ... as a PyTorch checkpoint
    (corrupt, or not a state dict of tensors): PermissionError"."""
    from server.model import checkpoint
    from server.model.checkpoint import CheckpointError, load_checkpoint

    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(checkpoint.torch, "load", denied)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tiny_model_path)
    msg = str(e.value)
    assert "permission denied" in msg and "corrupt" not in msg and tiny_model_path in msg, msg


def test_a_model_without_read_permission_through_run_py(tiny_model_path, tmp_path):
    """The same through run.py, with the file's permission bits really in the way (root passes
    them: it runs without CAP_DAC_OVERRIDE then), and a file in a folder that may not be
    searched ("Model file not found" before)."""
    cmd = [sys.executable, "run.py"]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root, and no setpriv to drop CAP_DAC_OVERRIDE")
        cmd = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", *cmd]
    locked = tmp_path / "locked.pth"
    shutil.copy(tiny_model_path, locked)
    closed = tmp_path / "closed"
    closed.mkdir()
    shutil.copy(tiny_model_path, closed / "model.pth")
    locked.chmod(0)
    closed.chmod(0)
    try:
        for path in (locked, closed / "model.pth"):
            rc, out = _run(["--model", str(path)], cmd=cmd, tmp_path=tmp_path)
            assert rc == 2 and f"Cannot load the model: cannot read {path}: permission denied" \
                in out, (rc, out[-3000:])
            assert "corrupt" not in out and "not found" not in out and "Traceback" not in out
    finally:
        closed.chmod(0o755)
        locked.chmod(0o644)


def test_a_safetensors_file_is_said_to_be_one(tmp_path):
    """A ``.safetensors`` model was "corrupt, or not a state dict of tensors: RuntimeError:
    ... Please install safetensors with: pip install safetensors"; the server reads .pth
    checkpoints only."""
    import importlib.util
    import json
    import struct

    from server.model.checkpoint import CheckpointError, load_checkpoint

    if importlib.util.find_spec("safetensors") is not None:  # torch.load then reads the file
        pytest.skip("safetensors is installed: torch.load reads such files")

    header = json.dumps({"emb.weight": {"dtype": "BF16", "shape": [2, 2],
                                        "data_offsets": [0, 8]}}).encode()
    path = tmp_path / "rwkv7.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(8))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(path)
    msg = str(e.value)
    assert "looks like a safetensors file" in msg and ".pth checkpoints" in msg, msg
    assert "corrupt" not in msg and "pip install" not in msg, msg
    rc, out = _run(["--model", str(path)], tmp_path=tmp_path)
    assert rc == 2 and "looks like a safetensors file" in out and "Traceback" not in out, out


def test_a_model_path_that_is_no_regular_file_says_so(tmp_path):
    """``--model /dev/null`` (or a pipe) said "Model file not found" for a path that exists
    (session 43's QA)."""
    rc, out = _run(["--model", os.devnull], tmp_path=tmp_path)
    assert rc == 2 and "is not a regular file" in out and "not found" not in out, out
    assert "Traceback" not in out


# run.py whose runtime reports the allocator configuration it was built under, then stops
REPORT_ALLOCATOR = LAUNCH.replace("    raise RAISE", """    import os
    print("ALLOC", repr(os.environ.get("PYTORCH_CUDA_ALLOC_CONF")),
          repr(os.environ.get("CUBLAS_WORKSPACE_CONFIG")),
          repr(os.environ.get("CUBLASLT_WORKSPACE_SIZE")), flush=True)
    raise TaskStoreError("stop here")""")


@pytest.mark.parametrize("given,seen", [
    ({}, "'expandable_segments:True' ':4096:2' '4096'"),
    ({"PYTORCH_CUDA_ALLOC_CONF": ""}, "'' ':4096:2' '4096'"),
    ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"},
     "'max_split_size_mb:64' ':4096:2' '4096'"),
    ({"CUBLAS_WORKSPACE_CONFIG": ":16:8", "CUBLASLT_WORKSPACE_SIZE": "1024"},
     "'expandable_segments:True' ':16:8' '1024'")])
def test_run_py_builds_the_runtime_under_the_cuda_defaults(tmp_path, monkeypatch, given, seen):
    """run.py sets PyTorch's allocator variable and cuBLAS's workspace sizes before the runtime
    (and CUDA) is built, unless the user set them: ``PYTORCH_CUDA_ALLOC_CONF=`` keeps PyTorch's
    own default."""
    for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "CUBLAS_WORKSPACE_CONFIG",
                "CUBLASLT_WORKSPACE_SIZE"):
        monkeypatch.delenv(var, raising=False)
    env = given or None
    code = REPORT_ALLOCATOR.replace("RAISE", "None")
    rc, out = _run(["--demo", "tiny"], env=env, cmd=[sys.executable, "-c", code],
                   tmp_path=tmp_path)
    assert rc == 2 and f"ALLOC {seen}" in out, (rc, out[-3000:])
