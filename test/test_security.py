"""Security (issue 6 §7), checked in-process: no code execution from stored or uploaded data (no
pickle anywhere in ``server/``, ``torch.load`` only with ``weights_only=True``, malicious files
refused), the API key compared in constant time, CORS as configured (default: any origin, GET and
POST only, no credentials), unguessable 128-bit task ids, tracebacks in logs without variable
values. The key on every route and the key-free server log: ``test_reliability_admission.py``.
"""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal",
                     "joblib"}


def _server_modules():
    for path in sorted((ROOT / "server").rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _call_name(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Attribute):
        base = f.value.id if isinstance(f.value, ast.Name) else "?"
        return f"{base}.{f.attr}"
    return f.id if isinstance(f, ast.Name) else "?"


def test_no_pickle_eval_or_unsafe_torch_load_in_server():
    problems, loads = [], 0
    for path, tree in _server_modules():
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                problems += [f"{where}: import {a.name}" for a in node.names
                             if a.name.split(".")[0] in FORBIDDEN_MODULES]
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] in FORBIDDEN_MODULES:
                    problems.append(f"{where}: from {node.module} import ...")
            elif isinstance(node, ast.Call):
                name = _call_name(node)
                if name in ("eval", "exec", "pickle.loads", "pickle.load"):
                    problems.append(f"{where}:{node.lineno}: {name}()")
                kw = {k.arg: k.value for k in node.keywords}
                if name == "torch.load":
                    loads += 1
                    safe = isinstance(kw.get("weights_only"), ast.Constant) and \
                        kw["weights_only"].value is True
                    if not safe:
                        problems.append(f"{where}:{node.lineno}: torch.load without "
                                        "weights_only=True")
                if name.endswith(".load") and isinstance(kw.get("allow_pickle"), ast.Constant) \
                        and kw["allow_pickle"].value:
                    problems.append(f"{where}:{node.lineno}: allow_pickle=True")
    assert not problems, problems
    assert loads >= 2  # the checkpoint and state-file readers were seen


class _Evil:
    """Unpickling this would create ``marker``: a stand-in for arbitrary code."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_malicious_files_are_refused_without_running_code(tmp_path, tiny_loader):
    from server.model.checkpoint import CheckpointError, load_checkpoint
    from server.task.state_file import StateFileError, read_state_file

    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pth"
    torch.save({"emb.weight": torch.zeros(2, 2), "x": _Evil(marker)}, evil)
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(evil)
    with pytest.raises(StateFileError):
        read_state_file(evil.read_bytes(), tiny_loader.cfg)
    assert not marker.exists()


# ---- API key: constant-time comparison -----------------------------------------------------------
async def _ok_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _requests(app, calls: list[tuple[str, str, dict]]) -> list[httpx.Response]:
    async def run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return [await c.request(m, p, headers=h) for m, p, h in calls]
    return asyncio.run(run())


def test_api_key_is_compared_in_constant_time(monkeypatch):
    import server.api.middleware as mw

    seen = []
    real = mw.hmac.compare_digest

    def spy(a, b):
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(mw.hmac, "compare_digest", spy)
    key = "sk-abc123"
    app = mw.ApiKeyMiddleware(_ok_app, api_key=key)
    tries = ["Bearer sk-abc123", "Bearer sk-abc124", "Bearer sk-abc12", "bearer  sk-abc123 ",
             "Bearer \u00e9\u00e8"]
    replies = _requests(app, [("GET", "/v1/models", {"Authorization": t.encode()})
                              for t in tries])  # raw bytes: the last one is not ASCII
    assert [r.status_code for r in replies] == [200, 401, 401, 200, 401]
    assert len(seen) == len(tries) and all(b == key.encode() for _, b in seen)
    # missing or non-Bearer credentials never reach a comparison and are refused
    replies = _requests(app, [("GET", "/x", {}), ("GET", "/x", {"Authorization": f"Basic {key}"})])
    assert [r.status_code for r in replies] == [401, 401] and len(seen) == len(tries)
    assert _requests(app, [("GET", "/health", {})])[0].status_code == 200


# ---- CORS -----------------------------------------------------------------------------------------
def _preflight(origin: str, method: str) -> tuple[str, dict]:
    return "OPTIONS", {"Origin": origin, "Access-Control-Request-Method": method,
                       "Access-Control-Request-Headers": "authorization, content-type"}


def test_cors_default_any_origin_get_and_post_only():
    from server.api.middleware import CORSMiddleware

    app = CORSMiddleware(_ok_app)  # the default of RWKV_CORS_ORIGINS: "*"
    site = "https://chat.example"
    calls = [("GET", "/v1/models", {"Origin": site}), ("POST", "/v1/chat/completions",
                                                       {"Origin": site})]
    for method in ("POST", "GET", "DELETE", "PUT", "PATCH"):
        verb, headers = _preflight(site, method)
        calls.append((verb, "/v1/chat/completions", headers))
    replies = _requests(app, calls)
    for r in replies:
        assert r.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in r.headers  # no cookies cross-site
    for r in replies[2:]:
        allowed = {m.strip() for m in r.headers["access-control-allow-methods"].split(",")}
        assert allowed == {"GET", "POST", "OPTIONS"}


def test_cors_configured_origins_only(monkeypatch):
    from server.api.middleware import CORSMiddleware
    from server.config import Settings

    monkeypatch.setenv("RWKV_CORS_ORIGINS", "https://a.example, https://b.example/")
    app = CORSMiddleware(_ok_app, origins=Settings().cors_origins)
    good, bad = "https://b.example", "https://evil.example"
    replies = _requests(app, [("GET", "/v1/models", {"Origin": good}),
                              ("GET", "/v1/models", {"Origin": bad}),
                              ("OPTIONS", "/v1/models", _preflight(good, "POST")[1]),
                              ("OPTIONS", "/v1/models", _preflight(bad, "POST")[1])])
    assert replies[0].headers["access-control-allow-origin"] == good
    assert replies[0].headers["vary"] == "Origin"
    assert replies[2].status_code == 204 and replies[2].headers["access-control-allow-origin"] == good
    for r in (replies[1], replies[3]):
        assert "access-control-allow-origin" not in r.headers
    assert replies[3].status_code == 400


# ---- task ids -----------------------------------------------------------------------------------
def test_task_ids_are_128_bit_random(monkeypatch):
    import server.task.task as task_mod

    asked = []
    real = task_mod.secrets.token_hex
    monkeypatch.setattr(task_mod.secrets, "token_hex", lambda n: asked.append(n) or real(n))
    ids = [task_mod.new_task_id(p) for p in ("TASK", "TMP") for _ in range(2048)]
    assert set(asked) == {16}  # 16 bytes from the OS's CSPRNG (secrets)
    assert len(set(ids)) == len(ids)
    bits = [int(i.split("_", 1)[1], 16) for i in ids]
    assert all(len(i.split("_", 1)[1]) == 32 for i in ids)
    for b in range(128):  # every bit is a fair coin (a counter or clock would fail)
        share = sum((x >> b) & 1 for x in bits) / len(bits)
        assert 0.44 < share < 0.56, (b, share)


# ---- logs -----------------------------------------------------------------------------------------
def test_tracebacks_in_the_log_show_no_variable_values(tmp_path):
    code = (
        "import os\n"
        "from server.logger import setup_logging, get_logger\n"
        "setup_logging()\n"
        "def handler(headers):\n"
        "    token = headers['authorization']\n"
        "    raise ValueError('bad request', len(token))  # diagnose would show token\n"
        "try:\n"
        "    handler({'authorization': os.environ['TEST_KEY']})\n"
        "except ValueError as e:\n"
        "    get_logger('api').opt(exception=e).error('request failed')\n")
    script = tmp_path / "fail.py"  # a file: loguru could annotate its source lines
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_KEY": "Bearer sk-SECRET-4242"}
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    log = out.stdout + out.stderr
    assert "request failed" in log and "ValueError: ('bad request', 21)" in log  # the traceback is there
    assert "SECRET-4242" not in log
