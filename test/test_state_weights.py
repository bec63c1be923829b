"""A stored state belongs to the weights that computed it: a server restarted on another
checkpoint of the same shape (a newer release of the model, a fine-tune) served the templates
and tasks stored before, and their replies were neither model's, with a 200 (session 41's
note). Each stored state now carries the weights' digest (``checkpoint.weights_digest``), and
a state of other weights is refused (409 naming it; not listed in /v1/models), as a state of
another shape is."""

import time

import pytest
import torch
from fastapi.testclient import TestClient

from server.model.checkpoint import weights_digest
from server.model.random import make_random_state_dict


def test_the_digest_follows_the_weights_not_their_dtype():
    sd = make_random_state_dict(2, 128, seed=0, dtype=torch.bfloat16, device="cpu")
    digest = weights_digest(sd)
    assert weights_digest({k: v.float() for k, v in sd.items()}) == digest  # saved as fp32
    assert weights_digest(make_random_state_dict(2, 128, seed=1, dtype=torch.bfloat16,
                                                 device="cpu")) != digest
    tuned = dict(sd)  # one value changed at the end of one tensor
    w = tuned["blocks.1.ffn.value.weight"].clone()
    w.view(-1)[-1] += 1.0
    tuned["blocks.1.ffn.value.weight"] = w
    assert weights_digest(tuned) != digest


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_digest_of_weights_on_the_gpu_is_theirs_on_the_cpu():
    """``weights_digest`` of tensors on the GPU equals their CPU copy's (it reads each tensor's
    ends through a CPU copy). (A loaded checkpoint's and a demo's weights are on the CPU when
    digested: this guards the function, not a served path.)"""
    sd = make_random_state_dict(2, 128, seed=0, dtype=torch.bfloat16, device="cuda")
    assert weights_digest(sd) == weights_digest({k: v.cpu() for k, v in sd.items()})


@pytest.fixture(scope="module")
def other_model_path(tmp_path_factory) -> str:
    """A second random ``tiny`` checkpoint: the same shapes as ``tiny_model_path``'s, other
    weights."""
    from server.model.random import main as make_random

    path = tmp_path_factory.mktemp("models") / "rwkv7-tiny-other.pth"
    make_random([str(path), "--preset", "tiny", "--seed", "2"])
    return str(path)


def test_states_stored_by_other_weights_are_refused(tiny_model_path, other_model_path,
                                                    tmp_path, capsys):
    from server.api.app import create_app
    from server.config import Settings
    from test_state_files import tuning_file

    def app(path):
        return create_app(Settings(model_path=path, demo=None, device="cpu", api_key=None,
                                   task_db_path=str(tmp_path / "t.db")))

    body = {"prompt": "User: hi\n\nAssistant:", "max_tokens": 0}
    with TestClient(app(tiny_model_path)) as client:
        tid = client.post("/v1/tasks/create", json=body).json()["task_id"]
        assert client.post(f"/v1/tasks/{tid}/as_template?name=sys").status_code == 200
        run = client.post("/v1/tasks/create", json={**body, "max_tokens": 3,
                                                     "temperature": 0}).json()["task_id"]
        for _ in range(500):  # (a 3-token reply of the tiny model: well under a second)
            if client.get(f"/v1/tasks/{run}/get_result").json()["finished"]:
                break
            time.sleep(0.01)
        else:
            pytest.fail(f"task {run} did not finish")
        want = client.post("/v1/completions", json={
            "model": "rwkv-7:_sys", "prompt": " Hello", "max_tokens": 4,
            "temperature": 0}).json()["choices"][0]["text"]
        # an imported state-tuning file (no digest of its own) counts as these weights'
        cfg = client.app.state.runtime.loader.cfg
        r = client.post("/v1/tasks/import_state?name=imp", content=tuning_file(cfg))
        assert r.status_code == 200, r.text
    capsys.readouterr()
    with TestClient(app(other_model_path)) as client:
        # the operator learns of it at start, not from a client's 409 (the server's log)
        assert "2 of 2 stored templates do not fit the loaded model (_imp, _sys)" in \
            capsys.readouterr().err
        r = client.post("/v1/tasks/_imp/fork", json={"prompt": " more", "max_tokens": 2})
        assert r.status_code == 409 and "computed by other weights" in r.text, r.text
        listed = [m["id"] for m in client.get("/v1/models").json()["data"]]
        assert "rwkv-7:_sys" not in listed, listed
        r = client.post("/v1/completions", json={"model": "rwkv-7:_sys", "prompt": " Hello",
                                                  "max_tokens": 4})
        assert r.status_code == 409 and "computed by other weights" in r.text, r.text
        for path in ("/v1/tasks/_sys/fork", f"/v1/tasks/{run}/continue"):
            r = client.post(path, json={"prompt": " more", "max_tokens": 2})
            assert r.status_code == 409 and "computed by other weights" in r.text, (path, r.text)
        # still readable, and a fresh request on this model is served
        assert client.get(f"/v1/tasks/{run}/get_result").status_code == 200
        assert client.post("/v1/tasks/tmp", json={**body, "max_tokens": 2}).status_code == 200
    with TestClient(app(tiny_model_path)) as client:  # back on the weights that made them
        assert "rwkv-7:_sys" in [m["id"] for m in client.get("/v1/models").json()["data"]]
        r = client.post("/v1/completions", json={"model": "rwkv-7:_sys", "prompt": " Hello",
                                                  "max_tokens": 4, "temperature": 0})
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == want
        r = client.post(f"/v1/tasks/{run}/continue", json={"prompt": " more", "max_tokens": 2})
        assert r.status_code == 200, r.text


def test_the_scheduler_stamps_the_states_it_computes_and_refuses_others(tiny_loader):
    """Without the task database too (the SDK): a state that comes home from the scheduler is
    stamped with the loaded weights' digest, a fork carries its source's,
    and a task whose state another model computed fails alone at admission, naming it."""
    from server.scheduler import DynamicScheduler

    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    made = sched.new_task("User: hi\n\nAssistant:", max_tokens=3, temperature=0.0)
    sched.run()
    assert made.state is not None and made.state_model == tiny_loader.digest
    copy = made.fork("copy")
    assert copy.state_model == tiny_loader.digest
    alien = made.fork("alien")
    alien.state_model = "0123456789abcdef"  # (another checkpoint's)
    alien.continue_gen(max_tokens=2)
    copy.continue_gen(max_tokens=2)
    sched.add_task(alien)
    sched.add_task(copy)
    sched.run()
    assert alien.finish_reason == "error" and "computed by other weights" in alien.error
    assert alien.state_model == "0123456789abcdef"  # (its state never ran here)
    assert copy.finish_reason == "length" and copy.state_model == tiny_loader.digest


def test_the_command_line_stamps_imports_and_refuses_exports_of_other_weights(
        tiny_model_path, other_model_path, tmp_path, monkeypatch, capsys):
    """``python -m server.task.state_templates``: an import counts as RWKV_MODEL_PATH's
    weights' (a digest read from the memory-mapped checkpoint), and an export of a state of
    other weights is an ``error:`` line and exit code 2, as the server's export is a 409."""
    from server.config import settings
    from server.model.checkpoint import load_checkpoint
    from server.task.manager import TaskManager
    from server.task.state_templates import main
    from test_state_files import tuning_file

    monkeypatch.setattr(settings, "model_path", tiny_model_path)
    monkeypatch.setattr(settings, "task_db_path", str(tmp_path / "tasks.db"))
    sd, cfg = load_checkpoint(tiny_model_path)
    state_file = tmp_path / "tuned.pth"
    state_file.write_bytes(tuning_file(cfg))
    assert main(["import", str(state_file), "--name", "tuned"]) == 0
    manager = TaskManager(db_path=str(tmp_path / "tasks.db"))
    try:
        assert manager.get_task("_tuned").state_model == weights_digest(sd)
    finally:
        manager.close()
    assert main(["export", "_tuned", str(tmp_path / "a.st")]) == 0
    capsys.readouterr()
    monkeypatch.setattr(settings, "model_path", other_model_path)
    assert main(["export", "_tuned", str(tmp_path / "b.st")]) == 2
    assert "computed by other weights" in capsys.readouterr().err
    assert not (tmp_path / "b.st").exists()


def test_an_export_carries_its_weights_and_other_weights_refuse_its_import(
        tiny_model_path, other_model_path, tmp_path, monkeypatch, capsys):
    """An export names the weights that computed its state (``weights_digest``): imported on a
    server of other weights of the same shape it is a 422 naming them, and so is the command
    line's import, nothing stored; on its own weights it imports. Exports carried no digest
    before session 73 and an import was stamped as the loaded model's: the state moved onto
    another checkpoint, forks served with a 200 (a mutation review's finding). A file without
    the digest (an older export, a state-tuning file) still counts as the loaded model's."""
    import json
    import struct

    from server.api.app import create_app
    from server.config import Settings, settings
    from server.task.state_templates import main

    def app(path):
        return create_app(Settings(model_path=path, demo=None, device="cpu", api_key=None,
                                   task_db_path=str(tmp_path / f"{path[-9:]}.db")))

    with TestClient(app(tiny_model_path)) as client:
        tid = client.post("/v1/tasks/create", json={"prompt": "User: hi\n\nAssistant:",
                                                    "max_tokens": 0}).json()["task_id"]
        for _ in range(500):
            if client.get(f"/v1/tasks/{tid}/get_result").json()["finished"]:
                break
            time.sleep(0.01)
        data = client.get(f"/v1/tasks/{tid}/export_state").content
        digest = client.app.state.runtime.loader.digest
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        assert header["__metadata__"]["weights_digest"] == digest
        assert client.post("/v1/tasks/import_state?name=same", content=data).status_code == 200

    def with_metadata(**changes) -> bytes:
        meta = {k: v for k, v in {**header["__metadata__"], **changes}.items() if v is not None}
        raw = json.dumps({**header, "__metadata__": meta}).encode()
        raw += b" " * (-len(raw) % 8)
        return struct.pack("<Q", len(raw)) + raw + data[8 + n:]

    bare = with_metadata(weights_digest=None)  # (as an export before session 73)
    with TestClient(app(other_model_path)) as client:
        r = client.post("/v1/tasks/import_state?name=moved", content=data)
        assert r.status_code == 422 and "computed by other weights" in r.text, r.text
        assert client.get("/v1/tasks/_moved/status").status_code == 404
        assert client.post("/v1/tasks/import_state?name=old", content=bare).status_code == 200
        r = client.post("/v1/tasks/import_state?name=bad",
                        content=with_metadata(weights_digest="../not hex"))
        assert r.status_code == 400 and "weights_digest metadata is invalid" in r.text, r.text
    (tmp_path / "a.st").write_bytes(data)
    monkeypatch.setattr(settings, "model_path", other_model_path)
    monkeypatch.setattr(settings, "task_db_path", str(tmp_path / "cli.db"))
    capsys.readouterr()
    assert main(["import", str(tmp_path / "a.st"), "--name", "moved"]) == 2
    assert "computed by other weights" in capsys.readouterr().err
    monkeypatch.setattr(settings, "model_path", tiny_model_path)
    assert main(["import", str(tmp_path / "a.st"), "--name", "moved"]) == 0
