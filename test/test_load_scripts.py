"""The load scripts against a real server (tiny random model on the CPU): Locust headless for
15 s with 16 users, and the async batch script, both with zero failures; and the served-
throughput bench, which starts its own demo server."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_locust_headless_16_users_15s_zero_failures(server_url, tmp_path):
    cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "test" / "locustfile.py"),
           "--host", server_url, "--headless", "-u", "16", "-r", "16", "--run-time", "15s",
           "--csv", str(tmp_path / "perf"), "--only-summary"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "RWKV_LOCUST_MAX_TOKENS": "24"})
    assert out.returncode == 0, out.stderr[-3000:]
    with open(tmp_path / "perf_stats.csv", newline="") as f:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    for key in [("SSE", "ttft"), ("SSE", "stream"), ("POST", "POST /v1/tasks/tmp")]:
        assert int(rows[key]["Request Count"]) >= 16, (key, rows[key])
        assert rows[key]["Failure Count"] == "0", (key, rows[key])


def test_batch_async_openai_and_tasks(server_url):
    for api in ("openai", "tasks"):
        out = subprocess.run([sys.executable, str(ROOT / "test" / "batch_async.py"), "--url",
                              server_url, "--n", "8", "--concurrency", "8", "--max-tokens", "8",
                              "--api", api], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, (api, out.stdout[-2000:], out.stderr[-2000:])
        assert "tok/s" in out.stdout


def test_serve_load_script_measures_a_demo_server(tmp_path):
    """``server/bench/serve_load.sh`` (the served-throughput bench of docs/performance.md)
    starts a demo server, streams requests at it, prints the client's report and the server's
    pulses, and stops the server (its port is free again)."""
    import socket

    from server.bench.chat import free_port

    port = free_port()
    env = {**os.environ, "PRESET": "tiny", "PORT": str(port), "CONC": "4", "N": "4",
           "MAX_TOKENS": "8", "OUT": str(tmp_path), "RWKV_DEVICE": "cpu"}
    out = subprocess.run(["bash", str(ROOT / "server" / "bench" / "serve_load.sh")],
                         capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "requests      : 4  (errors: 0)" in out.stdout, out.stdout
    assert "## server pulses during the run" in out.stdout
    with pytest.raises(ConnectionRefusedError):  # the server is gone
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_serve_load_script_refuses_a_port_in_use(tmp_path):
    """A server already on PORT is not measured: the script says so and starts nothing."""
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "PRESET": "tiny", "PORT": str(port), "OUT": str(tmp_path)}
        out = subprocess.run(["bash", str(ROOT / "server" / "bench" / "serve_load.sh")],
                             capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1 and f"port {port} is in use" in out.stdout, out.stdout
    assert not list(tmp_path.glob("server-*.log"))  # no server was started
